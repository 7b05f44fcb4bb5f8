/**
 * JSON merge patch (RFC 7386). Objects merge key by key, `null` deletes a key, everything else
 * (arrays included) replaces. Returns a new value that shares the subtrees of `target` the patch
 * does not reach (the store's targets are frozen snapshots); neither input is modified.
 */
import { jsonClone } from './json-value.js';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return jsonClone(patch as Json);
  const out: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const key of Object.keys(patch)) {
    const value = patch[key];
    if (value === null) delete out[key];
    else out[key] = applyMergePatch(out[key], value);
  }
  return out;
}

/** Structural equality of JSON values (key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  // Loops rather than filter/every: this compares whole objects on every store write.
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    // Keys with undefined values do not count (JSON has none).
    let defined = 0;
    for (const k of Object.keys(a)) {
      const v = a[k];
      if (v === undefined) continue;
      defined++;
      if (!jsonEqual(v, b[k])) return false;
    }
    for (const k of Object.keys(b)) if (b[k] !== undefined) defined--;
    return defined === 0;
  }
  return false;
}
