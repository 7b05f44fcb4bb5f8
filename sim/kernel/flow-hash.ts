/** Deterministic flow hash (FNV-1a over the 4-tuple) for SO_REUSEPORT selection. */
import type { Packet } from './packet.js';

export function flowHash(p: Packet): number {
  let h = 0x811c9dc5;
  const s = `${p.src.value}:${p.sport}>${p.dst.value}:${p.dport}`;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}
