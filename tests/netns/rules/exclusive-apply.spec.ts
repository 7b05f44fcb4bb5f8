/**
 * Issue 19 on the real kernel, at the NetnsRules adapter: the strict plan applied in mode
 * `exclusive` (one full iptables-restore per family) reads back with no foreign rule (the
 * iptables-save text of the hooks and chains is what foreignRules() expects, so the repair pass
 * does not re-apply for nothing); an inserted ACCEPT, a foreign chain and a DROP policy in the
 * plan's tables are reported and gone after the next exclusive apply; a table the plan does not
 * use is left as it was.
 */
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import { withCluster } from '../../../e2e/netns/cluster.js';
import { execIn } from '../../../e2e/netns/ip.js';
import { netnsId } from '../../../impl/api/ids.js';
import { port } from '../../../impl/api/ports.js';
import { LinuxNetnsRules } from '../../../impl/linux/netns-rules.js';
import { buildInpodPlan } from '../../../impl/node-agent/rule-builder.js';
import { drift } from '../../../impl/node-agent/plan-drift.js';
import { foreignRules } from '../../../impl/node-agent/foreign-rules.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

const rules = new LinuxNetnsRules();

test('strict exclusive apply: exact read-back, foreign rules reported and replaced, a table the plan does not use emptied', async () => {
  await withCluster({ nodes: 1 }, async (c) => {
    const a = await c.addPod('node-0', 'a');
    const id = netnsId(a.netnsPath);
    const plan = buildInpodPlan({
      profile: 'strict',
      ipv6: true,
      dnsCapture: true,
      ingressMode: false,
      virtualInterfaces: [],
      proxyUid: 1337,
      probePorts: [port(8080)],
    });
    await rules.apply(id, plan, 'exclusive');
    const exact = await rules.read(id);
    expect(drift(exact, plan)).toEqual([]);
    expect(foreignRules(exact, plan)).toEqual([]);

    const tamper =
      '*nat\n:APP_ESCAPE - [0:0]\n:POSTROUTING DROP [0:0]\n-I OUTPUT 1 -j ACCEPT\nCOMMIT\n*security\n-A OUTPUT -j ACCEPT\nCOMMIT\n';
    await execIn(a.netns, ['iptables-restore', '--noflush'], tamper);
    const tampered = await rules.read(id);
    expect(drift(tampered, plan)).toEqual([]);
    const found = foreignRules(tampered, plan);
    expect(found).toHaveLength(4);
    expect(found).toEqual(
      expect.arrayContaining([
        'ipv4 security: the plan does not use this table, and it holds [-A OUTPUT -j ACCEPT]',
        'ipv4 nat: built-in chain POSTROUTING has policy DROP, not ACCEPT',
        'ipv4 nat: user chain APP_ESCAPE is not in the plan',
        expect.stringMatching(
          /^ipv4 nat: built-in chain OUTPUT holds \[-A OUTPUT -j ACCEPT \| -A OUTPUT -j ISTIO_OUTPUT\]/,
        ),
      ]),
    );

    await rules.apply(id, plan, 'exclusive');
    const repaired = await rules.read(id);
    expect(foreignRules(repaired, plan)).toEqual([]);
    // emptied (iptables-nft then prints no *security section at all)
    expect(repaired.iptables.ipv4).not.toMatch(/\*security\n[^*]*-A OUTPUT -j ACCEPT/);
    expect(repaired.iptables.ipv4.replace(/\*security\n[^]*?COMMIT\n/, '')).toEqual(exact.iptables.ipv4);
  });
});
