/**
 * Errors of the simulated kernel. Syscall-shaped failures carry the errno name the real call
 * would return (EADDRINUSE, EPERM, ...) so callers and differential tests compare like with like.
 */
type Errno =
  | 'EADDRINUSE'
  | 'EADDRNOTAVAIL'
  | 'EPERM'
  | 'EACCES'
  | 'EINVAL'
  | 'ENOENT'
  | 'EEXIST'
  | 'ENODEV'
  | 'ENETUNREACH'
  | 'EISCONN'
  | 'ENOTCONN'
  | 'EAFNOSUPPORT'
  | 'EOPNOTSUPP'
  | 'ESRCH';

export class SimErrnoError extends Error {
  constructor(
    readonly errno: Errno,
    readonly call: string,
    detail: string,
  ) {
    super(`${call}: ${errno}: ${detail}`);
  }
}

/** Configuration mistakes in a topology (unknown namespace, duplicate link, ...). */
export class SimConfigError extends Error {}
