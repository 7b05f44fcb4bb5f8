/**
 * Which worlds can run on this machine, and why not. Evaluated once per process; the
 * Playwright config prints the reasons so a skipped world is never silent.
 */
import { execFileSync } from 'node:child_process';

export interface WorldAvailability {
  readonly available: boolean;
  readonly reason: string;
}

function has(cmd: string, args: readonly string[] = ['--version']): boolean {
  try {
    execFileSync(cmd, args, { stdio: 'ignore', timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}

export function netnsWorld(): WorldAvailability {
  if (process.platform !== 'linux') return { available: false, reason: `netns world needs Linux (this is ${process.platform})` };
  if (process.getuid?.() !== 0) return { available: false, reason: 'netns world needs root (network namespaces, iptables); run as root' };
  if (!has('ip', ['-V'])) return { available: false, reason: 'netns world needs iproute2 (`ip`); apt-get install -y iproute2' };
  if (!has('iptables', ['-V'])) return { available: false, reason: 'netns world needs iptables; apt-get install -y iptables' };
  return { available: true, reason: 'root with iproute2 and iptables' };
}

export function kindWorld(): WorldAvailability {
  if (process.env['KIND'] !== '1') return { available: false, reason: 'kind world runs only when asked: set KIND=1 (needs Docker and kind)' };
  if (!has('kind', ['version'])) return { available: false, reason: 'kind world needs the `kind` binary on PATH' };
  if (!has('docker', ['info'])) return { available: false, reason: 'kind world needs a running Docker engine (`docker info` failed)' };
  return { available: true, reason: 'KIND=1 with kind and a Docker engine' };
}
