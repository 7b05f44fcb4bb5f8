/**
 * `npm run images -- --prune` (tools/images.ts pruneLocalImages) against a FAKE `docker` on PATH:
 * only ambient-lab repositories are touched, the current tags are kept, app images go before the
 * build and base images they were made from, an image a container uses is kept and reported, and
 * any other failure to remove one is an error naming the image.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pruneLocalImages } from '../../../tools/images.js';

const KEEP = {
  base: 'ambient-lab/base:1111111111111111',
  node: 'ambient-lab/node:2222222222222222',
  agent: 'ambient-lab/agent:2222222222222222',
  proxy: 'ambient-lab/proxy:2222222222222222',
  ca: 'ambient-lab/ca:2222222222222222',
};

/** Runs `fn` with a fake docker listing `images`; returns what it asked `docker image rm` to remove. */
async function withFakeDocker<T>(
  images: readonly string[],
  fail: Readonly<Record<string, string>>,
  fn: () => Promise<T>,
): Promise<{ result: T | Error; rm: string[] }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-prune-'));
  const rmLog = path.join(dir, 'rm.log');
  const failures = Object.entries(fail)
    .map(([tag, err]) => `  ${JSON.stringify(tag)}) echo ${JSON.stringify(err)} >&2; exit 1 ;;`)
    .join('\n');
  fs.writeFileSync(
    path.join(dir, 'docker'),
    `#!/bin/bash
case "$1 $2" in
  "info --format") echo 24.0.5 ;;
  "image ls") printf '%s\\n' ${images.map((i) => JSON.stringify(i)).join(' ')} ;;
  "image rm")
    echo "$3" >> ${rmLog}
    case "$3" in
${failures}
    esac ;;
  *) echo "fake docker: unexpected $*" >&2; exit 3 ;;
esac
`,
    { mode: 0o755 },
  );
  const path0 = process.env['PATH'];
  process.env['PATH'] = `${dir}:${path0}`;
  try {
    const result = await fn().catch((e: unknown) => (e instanceof Error ? e : new Error(String(e))));
    const rm = fs.existsSync(rmLog) ? fs.readFileSync(rmLog, 'utf8').trim().split('\n') : [];
    return { result, rm };
  } finally {
    process.env['PATH'] = path0;
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('prune removes only old ambient-lab tags, app images before build and base; current tags and other repositories stay', async () => {
  const { result, rm } = await withFakeDocker(
    [
      'ambient-lab/base:0000000000000000',
      KEEP.base,
      'ambient-lab/build:3333333333333333',
      'ambient-lab/proxy:4444444444444444',
      KEEP.node,
      KEEP.agent,
      KEEP.proxy,
      KEEP.ca,
      'ambient-lab/ca:4444444444444444',
      'ambient-lab/node:4444444444444444',
      'debian:bookworm',
      'ambient-lab/other:5555555555555555',
      'ambient-lab/agent:<none>',
    ],
    {},
    () => pruneLocalImages(KEEP),
  );
  expect(result).toEqual({
    removed: [
      'ambient-lab/proxy:4444444444444444',
      'ambient-lab/ca:4444444444444444',
      'ambient-lab/node:4444444444444444',
      'ambient-lab/build:3333333333333333',
      'ambient-lab/base:0000000000000000',
    ],
    inUse: [],
  });
  expect(rm).toEqual((result as { removed: string[] }).removed);
});

test('an image a container uses is kept and reported; any other failure is an error naming the image', async () => {
  const inUse = await withFakeDocker(
    ['ambient-lab/node:4444444444444444', 'ambient-lab/agent:4444444444444444'],
    {
      'ambient-lab/node:4444444444444444':
        'Error response from daemon: conflict: unable to remove repository reference (must force) - container 1a2b is using its referenced image 3c4d',
    },
    () => pruneLocalImages(KEEP),
  );
  expect(inUse.result).toEqual({
    removed: ['ambient-lab/agent:4444444444444444'],
    inUse: ['ambient-lab/node:4444444444444444'],
  });
  const broken = await withFakeDocker(
    ['ambient-lab/node:4444444444444444'],
    { 'ambient-lab/node:4444444444444444': 'Error response from daemon: disk on fire' },
    () => pruneLocalImages(KEEP),
  );
  expect(broken.result).toBeInstanceOf(Error);
  expect((broken.result as Error).message).toMatch(
    /removing the image ambient-lab\/node:4444444444444444: .*disk on fire/,
  );
});
