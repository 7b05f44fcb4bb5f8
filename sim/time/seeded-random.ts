/** Seeded randomness for the sim world: the Random port as xorshift128+ (deterministic per seed). */
import type { Random } from '../../impl/host/random.js';

/**
 * xorshift128+ on 32-bit halves of the two 64-bit state words: the same sequence as the bigint
 * form (tests/sim/kernel/seeded-random.spec.ts compares them), without allocating bigints per draw.
 */
export class SeededRandom implements Random {
  private s0h: number;
  private s0l: number;
  private s1h: number;
  private s1l: number;

  constructor(seed: number) {
    const m = (1n << 64n) - 1n;
    // splitmix64 to spread a small seed over both state words (never all-zero).
    let x = BigInt.asUintN(64, BigInt(Math.trunc(seed)));
    const next = (): bigint => {
      x = (x + 0x9e3779b97f4a7c15n) & m;
      let z = x;
      z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & m;
      z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & m;
      return z ^ (z >> 31n);
    };
    const s0 = next();
    const s1 = next() || 1n;
    this.s0h = Number(s0 >> 32n);
    this.s0l = Number(s0 & 0xffffffffn);
    this.s1h = Number(s1 >> 32n);
    this.s1l = Number(s1 & 0xffffffffn);
  }

  next(): number {
    let ah = this.s0h;
    let al = this.s0l;
    const bh = this.s1h;
    const bl = this.s1l;
    this.s0h = bh;
    this.s0l = bl;
    // a ^= a << 23
    ah = (ah ^ ((ah << 23) | (al >>> 9))) >>> 0;
    al = (al ^ (al << 23)) >>> 0;
    // a ^= a >> 17
    al = (al ^ ((al >>> 17) | (ah << 15))) >>> 0;
    ah = (ah ^ (ah >>> 17)) >>> 0;
    // a ^= b ^ (b >> 26)
    al = (al ^ bl ^ ((bl >>> 26) | (bh << 6))) >>> 0;
    ah = (ah ^ bh ^ (bh >>> 26)) >>> 0;
    this.s1h = ah;
    this.s1l = al;
    // (a + b) mod 2^64, top 53 bits, as a fraction of 2^53.
    const lo = al + bl;
    const hi = (ah + bh + (lo > 0xffffffff ? 1 : 0)) >>> 0;
    return (hi * 2 ** 21 + ((lo >>> 0) >>> 11)) / 2 ** 53;
  }

  int(min: number, max: number): number {
    if (!Number.isInteger(min) || !Number.isInteger(max) || max < min)
      throw new Error(`SeededRandom.int: invalid range [${min}, ${max}]`);
    return min + Math.floor(this.next() * (max - min + 1));
  }
}
