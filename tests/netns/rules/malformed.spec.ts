/**
 * A plan that is wrong must fail loudly and change nothing: contract violations are caught before
 * any I/O, text the tools reject is caught by the dry run, and what only the kernel rejects
 * (after other tables already committed) is rolled back — in an empty namespace and in one
 * already holding a good plan.
 */
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import { withCluster } from '../../../e2e/netns/cluster.js';
import { netnsId, type NetnsId } from '../../../impl/api/ids.js';
import type { RedirectionPlan } from '../../../impl/host/netns-rules.js';
import { LinuxNetnsRules, NetnsRulesError } from '../../../impl/linux/netns-rules.js';
import { UPSTREAM_INPOD_PLAN } from './upstream-inpod-plan.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

const rules = new LinuxNetnsRules();

const GOOD_MANGLE =
  '*mangle\n:AL_M - [0:0]\n-A PREROUTING -j AL_M\n-A AL_M -m mark --mark 0x539/0xfff -j CONNMARK --set-xmark 0x111/0xfff\nCOMMIT\n';

const CASES: ReadonlyArray<{ name: string; plan: RedirectionPlan; message: RegExp }> = [
  {
    name: 'hook to an undeclared chain (contract)',
    plan: { ...UPSTREAM_INPOD_PLAN, iptables: { ipv4: '*nat\n-A OUTPUT -j NOWHERE\nCOMMIT\n' } },
    message:
      /plan validation.*ipv4 restore text, line 2: rule on built-in chain OUTPUT must jump to a chain this plan declares/,
  },
  {
    name: 'missing COMMIT (contract)',
    plan: { ...UPSTREAM_INPOD_PLAN, iptables: { ipv4: '*nat\n:AL_N - [0:0]\n-A AL_N -j RETURN\n' } },
    message: /is not closed with COMMIT/,
  },
  {
    name: 'a route in the main table (contract)',
    plan: {
      ...UPSTREAM_INPOD_PLAN,
      routes: [{ family: 'ipv4', type: 'local', dst: '0.0.0.0/0', dev: 'lo', table: 254 }],
    },
    message: /route table 254 is not a private table/,
  },
  {
    name: 'valid v4, v6 with an option ip6tables does not know (dry run)',
    plan: {
      ...UPSTREAM_INPOD_PLAN,
      iptables: {
        ipv4: UPSTREAM_INPOD_PLAN.iptables.ipv4,
        ipv6: '*nat\n:AL_N - [0:0]\n-A OUTPUT -j AL_N\n-A AL_N -p tcp --no-such-option 1 -j RETURN\nCOMMIT\n',
      },
    },
    message:
      /nsenter --net=\S+ ip6tables-restore --noflush --test -w` failed: .*input line \d+: "-A AL_N -p tcp --no-such-option 1 -j RETURN".*nothing was changed/s,
  },
  {
    name: 'mangle fine, then TPROXY in nat, which only the kernel rejects (rollback)',
    plan: {
      ...UPSTREAM_INPOD_PLAN,
      iptables: {
        ipv4: `${GOOD_MANGLE}*nat\n:AL_N - [0:0]\n-A AL_N -p tcp -j TPROXY --on-port 15001 --tproxy-mark 0x111/0xfff\nCOMMIT\n`,
      },
    },
    message: /iptables-restore --noflush -w` failed: .*RULE_APPEND failed.*restored to its previous state\./s,
  },
];

for (const { name, plan, message } of CASES) {
  test(`malformed plan, ${name}: clear error naming the netns, nothing changes (empty and already-applied namespace)`, async () => {
    await withCluster({ nodes: 1 }, async (c) => {
      const pod = await c.addPod('node-0', 'a');
      const id: NetnsId = netnsId(pod.netnsPath);
      for (const setup of ['empty', 'applied'] as const) {
        if (setup === 'applied') await rules.apply(id, UPSTREAM_INPOD_PLAN);
        const before = await rules.read(id);
        const err = await rules.apply(id, plan).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err, `apply must fail (${setup})`).toBeInstanceOf(NetnsRulesError);
        expect((err as Error).message).toContain(`apply in netns ${pod.netnsPath}`);
        expect((err as Error).message).toMatch(message);
        expect(await rules.read(id), `state after failed apply (${setup})`).toEqual(before);
      }
    });
  });
}

test('a missing namespace gives an error naming it', async () => {
  const gone = netnsId('/run/netns/al-does-not-exist-anywhere');
  await expect(rules.read(gone)).rejects.toThrow(
    /read in netns \/run\/netns\/al-does-not-exist-anywhere: `nsenter .*` failed: .*No such file/,
  );
});
