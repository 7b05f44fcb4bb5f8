/**
 * Shared helpers of the socket adapter tests: a private namespace per test, the netns of every
 * thread of this process (to prove socket creation never leaves a thread elsewhere), and a
 * child process run as an unprivileged uid inside a namespace.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { NetnsRun } from '../../../e2e/netns/netns-run.js';
import { execIn } from '../../../e2e/netns/ip.js';
import { netnsId, type NetnsId } from '../../../impl/api/ids.js';
import { ADDON_FILE } from '../../../impl/linux/sockets-native.js';

export const repo = path.resolve(import.meta.dirname, '..', '..', '..');
export const addonPath = path.join(repo, ADDON_FILE);

interface Lab {
  readonly run: NetnsRun;
  /** Create a namespace; returns its name and its /run/netns path as a NetnsId. */
  ns(short: string): Promise<{ name: string; id: NetnsId; inode: number }>;
}

/** Run `fn` with a private NetnsRun that is disposed whatever happens. */
export async function withLab<T>(fn: (lab: Lab) => Promise<T>): Promise<T> {
  const run = new NetnsRun();
  try {
    return await fn({
      run,
      async ns(short) {
        const name = await run.create(short);
        const p = `/run/netns/${name}`;
        return { name, id: netnsId(p), inode: fs.statSync(p).ino };
      },
    });
  } finally {
    await run.dispose();
  }
}

/** Network namespace inode of each thread of this process, keyed by tid. */
export function threadNetns(): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      out.set(tid, fs.statSync(`/proc/self/task/${tid}/ns/net`).ino);
    } catch {
      // the thread ended between readdir and stat
    }
  }
  return out;
}

export function ownNetnsInode(): number {
  return fs.statSync('/proc/self/ns/net').ino;
}

/**
 * setpriv arguments for "uid/gid 1000, no supplementary groups, only these capabilities".
 * Dropping root for a non-zero uid clears the permitted and effective sets (no keep-caps);
 * capabilities asked for are passed as inheritable + ambient so the exec'd program has them.
 */
function asUser(uid: number, caps: readonly string[]): string[] {
  const argv = ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];
  if (caps.length === 0) argv.push('--inh-caps=-all');
  else {
    const list = caps.map((c) => `+${c}`).join(',');
    argv.push(`--inh-caps=-all,${list}`, `--ambient-caps=-all,${list}`);
  }
  return argv;
}

/**
 * Run a CommonJS snippet with the addon bound to `addon`, inside namespace `ns`, as `uid` with
 * `caps`; the snippet prints one JSON line, which is returned parsed.
 */
export async function runAddonAs(ns: string, uid: number, caps: readonly string[], body: string): Promise<unknown> {
  const script = `
    const addon = require(${JSON.stringify(addonPath)});
    const attempt = (f) => { try { return { ok: true, value: f() }; } catch (e) { return { ok: false, code: e.code, syscall: e.syscall, message: e.message }; } };
    ${body}
  `;
  const out = await execIn(ns, [...asUser(uid, caps), process.execPath, '-e', script]);
  return JSON.parse(out.trim()) as unknown;
}

/** Deterministic pseudo-random bytes (an LCG), so a failure reproduces exactly. */
export function pattern(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}
