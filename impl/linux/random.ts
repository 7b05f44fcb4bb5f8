/** Real adapter of the Random port: the platform's CSPRNG. */
import { randomInt } from 'node:crypto';
import type { Random } from '../host/random.js';

export class SystemRandom implements Random {
  next(): number {
    return randomInt(0, 2 ** 48) / 2 ** 48;
  }

  int(min: number, max: number): number {
    if (!Number.isInteger(min) || !Number.isInteger(max) || max < min) {
      throw new Error(`Random.int: invalid range [${min}, ${max}]`);
    }
    return randomInt(min, max + 1);
  }
}
