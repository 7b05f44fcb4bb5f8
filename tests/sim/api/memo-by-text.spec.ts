/**
 * memoByText (impl/api/memo-by-text.ts): one call per distinct text while it is remembered, the
 * oldest forgotten first when full, a throwing call never remembered.
 */
import { test, expect } from '@playwright/test';
import { memoByText } from '../../../impl/api/memo-by-text.js';

test('each text is computed once while remembered; the oldest goes first when full', () => {
  const calls: string[] = [];
  const f = memoByText((t: string) => {
    calls.push(t);
    return { length: t.length };
  }, 2);
  const a = f('a');
  expect(f('a')).toBe(a);
  f('bb');
  f('a');
  expect(calls).toEqual(['a', 'bb']);
  f('ccc'); // full: 'a' (the oldest) goes
  f('bb');
  f('a');
  expect(calls).toEqual(['a', 'bb', 'ccc', 'a']);
});

test('a call that throws is not remembered', () => {
  let n = 0;
  const f = memoByText((t: string) => {
    n++;
    if (t === 'bad') throw new Error('bad text');
    return t;
  });
  expect(() => f('bad')).toThrow('bad text');
  expect(() => f('bad')).toThrow('bad text');
  expect(n).toBe(2);
});
