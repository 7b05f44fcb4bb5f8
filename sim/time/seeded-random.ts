/** Seeded randomness for the sim world: the Random port as xorshift128+ (deterministic per seed). */
import type { Random } from '../../impl/host/random.js';

export class SeededRandom implements Random {
  private s0: bigint;
  private s1: bigint;

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
    this.s0 = next();
    this.s1 = next() || 1n;
  }

  next(): number {
    const m = (1n << 64n) - 1n;
    let a = this.s0;
    const b = this.s1;
    this.s0 = b;
    a ^= (a << 23n) & m;
    a ^= a >> 17n;
    a ^= b ^ (b >> 26n);
    this.s1 = a;
    return Number(((a + b) & m) >> 11n) / 2 ** 53;
  }

  int(min: number, max: number): number {
    if (!Number.isInteger(min) || !Number.isInteger(max) || max < min) throw new Error(`SeededRandom.int: invalid range [${min}, ${max}]`);
    return min + Math.floor(this.next() * (max - min + 1));
  }
}
