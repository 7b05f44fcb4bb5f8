/**
 * What ships is what runs, on the real kernel: the lab (netns world, `up`) launches the agent
 * and the proxy with the users, groups, capabilities and environment of the deployment
 * manifests (deploy/ rendered by kubectl kustomize, read by e2e/deployment/launch.ts) — read back
 * from /proc of the running processes — the profile, IPv6 and DNS capture come from the rendered
 * components, not from lab flags, and a change in a rendered copy changes the processes it starts.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { netnsWorldFactory } from '../../../e2e/netns/world.js';
import { NetnsLab } from '../../../e2e/netns/world-lab.js';
import { renderDeployment } from '../../../e2e/deployment/launch.js';

const avail = netnsWorldFactory.available();
test.skip(!avail.ok, avail.reason);
test.setTimeout(180_000);

/** The lab's settings below, as deploy/'s components render them. */
const SETTINGS = { profile: 'strict', ipv6: false, dnsCapture: false } as const;

/** Capability bits (linux/capability.h) of the names the manifests use. */
const CAP_BITS: Record<string, number> = { net_admin: 12, net_raw: 13, sys_ptrace: 19, sys_admin: 21 };

function capMask(names: readonly string[]): bigint {
  return names.reduce((m, n) => m | (1n << BigInt(CAP_BITS[n]!)), 0n);
}

/** Uid, gid, supplementary groups, effective capabilities and environment of a running process. */
function processOf(pid: number): {
  uid: number;
  gid: number;
  groups: number[];
  capEff: bigint;
  env: Record<string, string>;
} {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string): string => {
    const m = new RegExp(`^${name}:[ \\t]*(.*)$`, 'm').exec(status);
    if (!m) throw new Error(`/proc/${pid}/status has no ${name}`);
    return m[1]!.trim();
  };
  const env = Object.fromEntries(
    fs
      .readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((kv) => {
        const i = kv.indexOf('=');
        return [kv.slice(0, i), kv.slice(i + 1)];
      }),
  );
  return {
    uid: Number(field('Uid').split(/\s+/)[0]),
    gid: Number(field('Gid').split(/\s+/)[0]),
    groups: field('Groups') === '' ? [] : field('Groups').split(/\s+/).map(Number),
    capEff: BigInt(`0x${field('CapEff')}`),
    env,
  };
}

async function withLab(deployment: string | undefined, fn: (lab: NetnsLab) => Promise<void>): Promise<void> {
  const lab = await NetnsLab.create({
    nodes: 1,
    ...SETTINGS,
    stateRoot: '/run/ambient-lab/worlds',
    ...(deployment ? { deployment } : {}),
  });
  try {
    await fn(lab);
  } finally {
    await lab.destroy();
  }
}

function pidOf(lab: NetnsLab, component: 'agent' | 'proxy'): number {
  const p = lab.state.components[`node-0/${component}`];
  if (p === undefined) throw new Error(`the lab has no running ${component}`);
  return p.pid;
}

test('the shipped manifests: the proxy runs as 1337:1337 with NET_ADMIN and SYS_ADMIN only; the agent as root in group 1337 with its four, told the proxy uid', async () => {
  await withLab(undefined, async (lab) => {
    const proxy = processOf(pidOf(lab, 'proxy'));
    expect(proxy).toMatchObject({ uid: 1337, gid: 1337, groups: [] });
    expect(proxy.capEff).toBe(capMask(['net_admin', 'sys_admin']));
    const agent = processOf(pidOf(lab, 'agent'));
    expect(agent).toMatchObject({ uid: 0, gid: 0, groups: [1337] });
    expect(agent.capEff).toBe(capMask(['net_admin', 'net_raw', 'sys_admin', 'sys_ptrace']));
    expect(agent.env['AMBIENT_LAB_PROXY_UID']).toBe('1337');
    // profile, IPv6 and DNS capture come from the rendered components, not from lab flags
    expect(agent.env).toMatchObject({
      AMBIENT_LAB_PROFILE: 'strict',
      AMBIENT_LAB_IPV6: 'false',
      AMBIENT_LAB_DNS_CAPTURE: 'false',
    });
    expect(proxy.env['AMBIENT_LAB_IPV6']).toBe('false');
    expect(proxy.env['AMBIENT_LAB_PROFILE']).toBe('strict'); // the proxy's outbound follows the profile too
    const argv = fs.readFileSync(`/proc/${pidOf(lab, 'agent')}/cmdline`, 'utf8').split('\0');
    for (const flag of ['--profile', '--ipv6', '--dns-capture'])
      expect(argv.some((a) => a.startsWith(flag))).toBe(false);
    // the agent became ready only with the plugin chained in the node's conflist (its readiness check)
    const status = await lab.componentStatus('agent', 'node-0');
    expect(status.detail).toContain('ambient-lab-cni installed and chained in');
    // The root key is the CA's alone (its Secret: mode 0440, the CA's group 1338), and the CA runs
    // as its Deployment says: 1338:1338 with no capabilities.
    const key = fs.statSync(path.join(lab.state.runDir, 'mesh-ca.key'));
    expect({ gid: key.gid, mode: key.mode & 0o777 }).toEqual({ gid: 1338, mode: 0o440 });
    const ca = processOf(lab.state.ca!.pid);
    expect(ca).toMatchObject({ uid: 1338, gid: 1338, groups: [] });
    expect(ca.capEff).toBe(capMask([]));
    // The proxy holds the root certificate and its own token, not the key.
    const proxyArgv = fs.readFileSync(`/proc/${pidOf(lab, 'proxy')}/cmdline`, 'utf8').split('\0');
    expect(proxyArgv.some((a) => a.startsWith('--ca-key'))).toBe(false);
    expect(proxy.env['AMBIENT_LAB_CERTIFICATES']).toBe('ca');
    const token = fs.statSync(path.join(lab.nodeDir('node-0'), 'tokens', 'istio-token'));
    expect({ gid: token.gid, mode: token.mode & 0o777 }).toEqual({ gid: 1337, mode: 0o440 });
  });
});

test('a rendered copy with another proxy uid and group: the lab starts the proxy as that, and the agent admits it', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-launch-'));
  try {
    const rendered = renderDeployment(SETTINGS);
    const edited = rendered
      .replace(/runAsUser: 1337/g, 'runAsUser: 4242')
      .replace(/runAsGroup: 1337/g, 'runAsGroup: 4243')
      .replace(/fsGroup: 1337/g, 'fsGroup: 4243')
      .replace(/supplementalGroups:\n(\s+)- 1337/g, 'supplementalGroups:\n$1- 4243')
      .replace(/name: AMBIENT_LAB_PROXY_UID\n(\s+)value: "1337"/, 'name: AMBIENT_LAB_PROXY_UID\n$1value: "4242"')
      .replace(
        /name: AMBIENT_LAB_ZDS_SOCKET_GROUP\n(\s+)value: "1337"/,
        'name: AMBIENT_LAB_ZDS_SOCKET_GROUP\n$1value: "4243"',
      );
    // every edit hit: the proxy's runAsUser, runAsGroup and fsGroup, the agent's supplementalGroups, 2 env values
    expect(edited.match(/4242|4243/g)?.length).toBe(6);
    const file = path.join(dir, 'deployment.yaml');
    fs.writeFileSync(file, edited);
    // The proxy became ready (NetnsLab.create waits for it): the agent's ZDS peer check admitted uid 4242.
    await withLab(file, async (lab) => {
      expect(processOf(pidOf(lab, 'proxy'))).toMatchObject({ uid: 4242, gid: 4243 });
      const agent = processOf(pidOf(lab, 'agent'));
      expect(agent.groups).toEqual([4243]);
      expect(agent.env['AMBIENT_LAB_PROXY_UID']).toBe('4242');
      expect(fs.statSync(path.join(lab.nodeDir('node-0'), 'zds.sock')).gid).toBe(4243);
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
