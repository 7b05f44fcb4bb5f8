/**
 * Who owns a socket: uid, gid and the effective capability set, plus the kernel version, which
 * decides some permission checks (SO_MARK accepts CAP_NET_RAW only from Linux 5.17 on).
 * A uid of 0 has no privilege of its own here: capabilities are explicit, as in a container
 * whose capability set was trimmed.
 */
export type Capability = 'NET_ADMIN' | 'NET_RAW' | 'NET_BIND_SERVICE';

export interface Credentials {
  readonly uid: number;
  readonly gid: number;
  readonly caps: ReadonlySet<Capability>;
}

export function credentials(uid: number, gid: number, caps: Iterable<Capability> = []): Credentials {
  if (!Number.isInteger(uid) || uid < 0 || uid > 0xfffffffe) throw new Error(`invalid uid ${uid}`);
  if (!Number.isInteger(gid) || gid < 0 || gid > 0xfffffffe) throw new Error(`invalid gid ${gid}`);
  return { uid, gid, caps: new Set(caps) };
}

/** Kernel version as [major, minor]. */
export type KernelVersion = readonly [number, number];

export function parseKernelVersion(s: string): KernelVersion {
  const m = /^(\d+)\.(\d+)(?:\.\d+)?$/.exec(s);
  if (!m) throw new Error(`invalid kernel version ${JSON.stringify(s)}: expected MAJOR.MINOR[.PATCH], e.g. 6.1`);
  return [Number(m[1]), Number(m[2])];
}

function atLeast(v: KernelVersion, major: number, minor: number): boolean {
  return v[0] > major || (v[0] === major && v[1] >= minor);
}

/** SO_MARK: CAP_NET_ADMIN; since 5.17 (commit 41ddc2ba... "net: allow SO_MARK with CAP_NET_RAW") also CAP_NET_RAW. */
export function maySetMark(c: Credentials, v: KernelVersion): boolean {
  return c.caps.has('NET_ADMIN') || (atLeast(v, 5, 17) && c.caps.has('NET_RAW'));
}

/** IP_TRANSPARENT / IPV6_TRANSPARENT: CAP_NET_RAW or CAP_NET_ADMIN. */
export function maySetTransparent(c: Credentials): boolean {
  return c.caps.has('NET_ADMIN') || c.caps.has('NET_RAW');
}

/** AF_PACKET and raw IP sockets: CAP_NET_RAW. */
export function mayOpenRaw(c: Credentials): boolean {
  return c.caps.has('NET_RAW');
}

/** Changing netfilter rules, routes or links in the namespace: CAP_NET_ADMIN. */
export function mayAdminNetwork(c: Credentials): boolean {
  return c.caps.has('NET_ADMIN');
}
