/** What `up`, `down`, `status` and `exec` share: the root check and where a lab's state lives. */
import * as path from 'node:path';
import { DEFAULT_STATE_ROOT } from '../../e2e/netns/world-lab.js';
import { requireTools } from '../../e2e/netns/required-tools.js';
import { HarnessError, UsageError } from '../errors.js';

export const DEFAULT_LAB = 'default';

export function requireRoot(cmd: string): void {
  if (process.getuid?.() !== 0) {
    throw new HarnessError(
      `ambient-lab ${cmd} needs root: it creates network namespaces, runs iptables and starts processes as other users. Try: sudo ambient-lab ${cmd} ...`,
    );
  }
}

/** Root, and every tool the real-kernel side runs (e2e/netns/required-tools.ts), checked before any work. */
export function requireRootAndTools(cmd: string): void {
  requireRoot(cmd);
  requireTools(`ambient-lab ${cmd}`);
}

/** The state directory of lab NAME; a name that could escape it or clash is a usage error. */
export function labDir(name: string): string {
  if (!/^[a-z0-9][a-z0-9-]{0,30}$/.test(name))
    throw new UsageError(
      `--name ${JSON.stringify(name)}: invalid lab name; accepted: [a-z0-9][a-z0-9-]*, at most 31 characters`,
    );
  return path.join(DEFAULT_STATE_ROOT, name);
}
