/**
 * Copy and freeze of the JSON objects the sim API server stores.
 *
 * Stored objects are deep-frozen snapshots: one object per resourceVersion, shared by the store,
 * its event log, every watcher and every informer cache (copy-on-write — a write builds a new
 * snapshot that shares the unchanged frozen subtrees of the old one). Freezing is what makes the
 * sharing safe: a watcher that tries to change what it was given gets a TypeError instead of
 * silently changing the store. What a caller gets from get/list/create/update/patch/delete is a
 * fresh mutable copy, as from a real API server.
 */

/**
 * A deep copy of a JSON value: plain objects, arrays and primitives are copied by hand (several
 * times faster than structuredClone for objects of this size); undefined values are kept, as
 * structuredClone keeps them; anything else (a Date) goes through structuredClone.
 */
export function jsonClone<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      out[i] = typeof v === 'object' && v !== null ? jsonClone(v) : v;
    }
    return out as T;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return structuredClone(value); // a Date or the like
  const out: Record<string, unknown> = {};
  for (const k in value) {
    const v: unknown = (value as Record<string, unknown>)[k];
    out[k] = typeof v === 'object' && v !== null ? jsonClone(v) : v;
  }
  return out as T;
}

/**
 * Freeze a JSON value and everything under it. A frozen subtree is taken as frozen all the way
 * down (that is the only way this module freezes), so shared subtrees are not walked again.
 * Children go first and primitives are skipped without a call: about twice as fast as freezing
 * top-down, and this runs on every write.
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) deepFreeze(v);
    }
  } else {
    for (const k in value) {
      const v: unknown = (value as Record<string, unknown>)[k];
      if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) deepFreeze(v);
    }
  }
  return Object.freeze(value);
}
