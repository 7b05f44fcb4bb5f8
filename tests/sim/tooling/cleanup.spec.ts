/** e2e/cleanup.ts: cleanup after a failure keeps the first error and reports a failing cleanup. */
import { test, expect } from '@playwright/test';
import { rethrowAfterCleanup } from '../../../e2e/cleanup.js';

test('the first error is rethrown as it is when every cleanup works, and every cleanup runs', async () => {
  const first = new Error('ADD failed');
  const ran: string[] = [];
  await expect(
    rethrowAfterCleanup(
      first,
      [
        'a',
        async () => {
          ran.push('a');
        },
      ],
      [
        'b',
        async () => {
          ran.push('b');
        },
      ],
    ),
  ).rejects.toBe(first);
  expect(ran).toEqual(['a', 'b']);
});

test('a failing cleanup is named next to the first error, which stays the cause; later cleanups still run', async () => {
  const first = new Error('ADD failed');
  const ran: string[] = [];
  const err = await rethrowAfterCleanup(
    first,
    [
      'remove netns x',
      async () => {
        throw new Error('Device or resource busy');
      },
    ],
    [
      'b',
      async () => {
        ran.push('b');
      },
    ],
  ).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(Error);
  expect((err as Error).message).toContain('ADD failed');
  expect((err as Error).message).toContain('remove netns x: Device or resource busy');
  expect((err as Error).cause).toBe(first);
  expect(ran).toEqual(['b']);
});
