/**
 * Which worlds can run on this machine, and why not. Evaluated once per process; the
 * Playwright config prints the reasons so a skipped world is never silent.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { kubectlAvailability } from '../e2e/deployment/launch.js';
import { offlineImagesHostProblem } from '../tools/images.js';
import {
  locateTool,
  missingTools,
  missingToolsReason,
  REQUIRED_TOOLS,
  requiredPackages,
} from '../e2e/netns/required-tools.js';

interface WorldAvailability {
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

export function netnsWorld(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
  uid: number | undefined = process.getuid?.(),
): WorldAvailability {
  if (platform !== 'linux') return { available: false, reason: `netns world needs Linux (this is ${platform})` };
  if (uid !== 0)
    return { available: false, reason: 'netns world needs root (network namespaces, iptables); run as root' };
  const missing = missingTools(env['PATH'] ?? '');
  if (missing.length > 0) {
    const reason = `netns world needs tools this machine lacks — ${missingToolsReason(missing)}`;
    // In CI, as root on Linux, the netns world is meant to run: a missing install step must be
    // red, not a quietly skipped project (.ci/run installs every package in required-tools.ts).
    if (env['CI']) throw new Error(`CI is set and this is root on Linux, but ${reason}`);
    return { available: false, reason };
  }
  return {
    available: true,
    reason: `root with every required tool (${REQUIRED_TOOLS.length}: ${requiredPackages().join(', ')})`,
  };
}

/**
 * The netns world with its lab (NetnsLab: the components launched from deploy/ rendered by
 * `kubectl kustomize`): netnsWorld() and kubectl. Without kubectl its tests skip with the reason
 * (kubectl is not a Debian package recent enough; .ci/run says whether it is there).
 */
export function netnsLabWorld(): WorldAvailability {
  const w = netnsWorld();
  if (!w.available) return w;
  const k = kubectlAvailability();
  return k.ok ? w : { available: false, reason: `netns world lab: ${k.reason}` };
}

/** Debian's chromium: the browser tests drive it (never a downloaded browser). */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * The browser tests (tests/browser/): Debian's chromium at CHROMIUM. Missing: skipped with the
 * package to install — except under CI as root on Linux, where .ci/run installs it and its
 * absence must be red.
 */
export function browserWorld(
  env: NodeJS.ProcessEnv = process.env,
  exists: (p: string) => boolean = (p) => has(p, ['--version']),
): WorldAvailability {
  if (exists(CHROMIUM)) return { available: true, reason: `Debian chromium at ${CHROMIUM}` };
  const reason = `browser tests need Debian's chromium at ${CHROMIUM} (apt-get install chromium; .ci/run installs it)`;
  if (env['CI'] && process.platform === 'linux' && process.getuid?.() === 0)
    throw new Error(`CI is set and this is root on Linux, but ${reason}`);
  return { available: false, reason };
}

/**
 * `nft` (Debian package nftables) for the nftables backend's kernel tests (tests/netns/rules/
 * nftables.spec.ts), beside the netns world's own tools. Missing: skipped naming the package —
 * except under CI as root on Linux, where .ci/run installs it and its absence must be red.
 */
export function nftTool(env: NodeJS.ProcessEnv = process.env): WorldAvailability {
  const w = netnsWorld(env);
  if (!w.available) return w;
  if (locateTool('nft', env['PATH'] ?? '') !== undefined) return { available: true, reason: 'nft on PATH' };
  const reason = 'the nftables kernel tests need `nft` (Debian package nftables; .ci/run installs it)';
  if (env['CI']) throw new Error(`CI is set and this is root on Linux, but ${reason}`);
  return { available: false, reason };
}

export function kindWorld(): WorldAvailability {
  if (process.env['KIND'] !== '1')
    return { available: false, reason: 'kind world runs only when asked: set KIND=1 (needs Docker and kind)' };
  if (!has('kind', ['version'])) return { available: false, reason: 'kind world needs the `kind` binary on PATH' };
  if (!has('docker', ['info']))
    return { available: false, reason: 'kind world needs a running Docker engine (`docker info` failed)' };
  return { available: true, reason: 'KIND=1 with kind and a Docker engine' };
}

/**
 * The container world (e2e/containers/, images from tools/images.ts): a Docker engine. `.ci/run`
 * says whether it could provide one in AMBIENT_LAB_DOCKER (`available`, or `unavailable: <reason>`,
 * ci/README.md); unset (a developer's shell), `docker info` is asked here.
 */
export function containersWorld(
  env: NodeJS.ProcessEnv = process.env,
  osRelease: string = readOsRelease(),
): WorldAvailability {
  const said = env['AMBIENT_LAB_DOCKER'];
  if (said?.startsWith('unavailable:')) return { available: false, reason: `container world: ${said}` };
  const host = offlineImagesHostProblem(osRelease);
  if (host) return { available: false, reason: `container world: ${host}` };
  // The world wires node containers with the netns world's tools, as root (e2e/containers/world.ts).
  const netns = netnsWorld({ ...env, CI: '' });
  if (!netns.available) return { available: false, reason: `container world: ${netns.reason}` };
  if (!has('docker', ['info']))
    return {
      available: false,
      reason:
        'container world needs a running Docker engine (`docker info` failed): install docker.io and start dockerd (.ci/run does both)',
    };
  return { available: true, reason: 'a Docker engine answers; root with the netns tools' };
}

function readOsRelease(): string {
  try {
    return readFileSync('/etc/os-release', 'utf8');
  } catch {
    return ''; // not Linux, or no os-release: offlineImagesHostProblem says so
  }
}
