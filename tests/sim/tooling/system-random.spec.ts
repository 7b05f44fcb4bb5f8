/** The real Random adapter stays in [0, 1) and in range (it once threw: randomInt's span is < 2^48). */
import { test, expect } from '@playwright/test';
import { SystemRandom } from '../../../impl/linux/random.js';

test('SystemRandom.next is in [0, 1) and int is within its inclusive bounds', () => {
  const r = new SystemRandom();
  const seen = new Set<number>();
  for (let i = 0; i < 2000; i++) {
    const v = r.next();
    expect(v).toBeGreaterThanOrEqual(0);
    expect(v).toBeLessThan(1);
    const n = r.int(1, 3);
    expect([1, 2, 3]).toContain(n);
    seen.add(n);
  }
  expect(seen.size).toBe(3);
  expect(() => r.int(3, 1)).toThrow('invalid range');
});
