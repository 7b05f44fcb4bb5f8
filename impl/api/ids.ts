/** Identifiers shared by every component. Constructors validate; the types keep them apart. */
import type { Brand } from './brand.js';

/** metadata.uid of a Pod (RFC 4122 UUID text in real clusters; any non-empty token in the sim). */
export type PodUid = Brand<string, 'PodUid'>;
/** A network namespace handle as the world names it: a /proc or /run/netns path, or a sim id. */
export type NetnsId = Brand<string, 'NetnsId'>;

const TOKEN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

export function podUid(raw: string): PodUid {
  if (!TOKEN.test(raw))
    throw new Error(
      `invalid pod UID ${JSON.stringify(raw)}: expected 1-253 characters of [A-Za-z0-9._-] starting with an alphanumeric`,
    );
  return raw as PodUid;
}

export function netnsId(raw: string): NetnsId {
  if (raw.length === 0 || raw.length > 4096 || /[\0\n]/.test(raw)) {
    throw new Error(
      `invalid network namespace handle ${JSON.stringify(raw)}: expected a non-empty path or id without NUL or newline`,
    );
  }
  return raw as NetnsId;
}
