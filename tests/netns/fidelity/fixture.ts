/**
 * Shared checks of the fidelity tests: what a run left behind (namespaces with its prefix,
 * probe processes by pid).
 */
import { listNetns } from '../../../e2e/netns/ip.js';

export async function namespacesWithPrefix(prefix: string): Promise<string[]> {
  return (await listNetns()).filter((n) => n.startsWith(prefix));
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
