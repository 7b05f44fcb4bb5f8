/** Real adapter of the Random port: the platform's CSPRNG. */
import { randomBytes, randomInt } from 'node:crypto';
import type { Random } from '../host/random.js';

export class SystemRandom implements Random {
  next(): number {
    // 48 random bits (randomInt's range is limited to < 2^48, so read bytes instead).
    return randomBytes(6).readUIntBE(0, 6) / 2 ** 48;
  }

  int(min: number, max: number): number {
    if (!Number.isInteger(min) || !Number.isInteger(max) || max < min) {
      throw new Error(`Random.int: invalid range [${min}, ${max}]`);
    }
    return randomInt(min, max + 1);
  }
}
