/**
 * sim host-local: CNI_ARGS keys other than IP and IgnoreUnknown are refused unless
 * IgnoreUnknown=1 (or true), as the reference plugin does; a second ADD for the same
 * (container, ifname) is refused until DEL. Exercised through the exec protocol.
 */
import { test, expect } from '@playwright/test';
import { cniEnv, k8sCniArgs, parseErrorJson, parseResult } from '../../../impl/api/cni.js';
import { IpamDisk, hostLocalPlugin } from '../../../sim/cni/host-local.js';

const conf = JSON.stringify({
  cniVersion: '1.0.0',
  name: 'podnet',
  type: 'host-local',
  ipam: { type: 'host-local', ranges: [[{ subnet: '10.244.3.0/24' }]] },
});

function env(command: 'ADD' | 'DEL', args: Array<[string, string]>, id = 'c1'): Record<string, string> {
  return cniEnv({ command, containerId: id, netns: '/var/run/netns/x', ifname: 'eth0', args, path: ['/opt/cni/bin'] });
}

test('unknown CNI_ARGS are refused without IgnoreUnknown, accepted with it', async () => {
  const plugin = hostLocalPlugin(new IpamDisk());
  const pod = k8sCniArgs({ namespace: 'ns', name: 'p', uid: 'u1' }, 'sb1');
  const without = pod.filter(([k]) => k !== 'IgnoreUnknown');
  const refused = await plugin.exec({ env: env('ADD', without), stdin: conf });
  expect(refused.exitCode).toBe(1);
  expect(parseErrorJson(refused.stdout)?.msg).toContain('ARGS: unknown args ["K8S_POD_NAMESPACE=ns"');

  for (const flag of ['1', 'true', 'TRUE']) {
    const id = `c-${flag}`;
    const ok = await plugin.exec({ env: env('ADD', [...without, ['IgnoreUnknown', flag]], id), stdin: conf });
    expect(ok.exitCode, ok.stdout).toBe(0);
    expect(parseResult(ok.stdout).ips?.length).toBe(1);
  }
  // IgnoreUnknown=0 does not ignore.
  const zero = await plugin.exec({ env: env('ADD', [...without, ['IgnoreUnknown', '0']], 'c-0'), stdin: conf });
  expect(zero.exitCode).toBe(1);
  // Only known keys: nothing to ignore.
  const known = await plugin.exec({ env: env('ADD', [], 'c-known'), stdin: conf });
  expect(known.exitCode, known.stdout).toBe(0);
});

test('a second ADD of the same attachment is refused until DEL', async () => {
  const plugin = hostLocalPlugin(new IpamDisk());
  const args = k8sCniArgs({ namespace: 'ns', name: 'p', uid: 'u1' }, 'sb1');
  const first = parseResult((await plugin.exec({ env: env('ADD', args), stdin: conf })).stdout);
  const again = await plugin.exec({ env: env('ADD', args), stdin: conf });
  expect(again.exitCode).toBe(1);
  expect(parseErrorJson(again.stdout)?.details).toContain('already holds addresses');
  expect((await plugin.exec({ env: env('DEL', args), stdin: conf })).exitCode).toBe(0);
  const third = await plugin.exec({ env: env('ADD', args), stdin: conf });
  expect(third.exitCode, third.stdout).toBe(0);
  // The next free address after the last reserved one (host-local's iterator), not the released one.
  expect(parseResult(third.stdout).ips?.[0]?.address).not.toBe(first.ips?.[0]?.address);
});
