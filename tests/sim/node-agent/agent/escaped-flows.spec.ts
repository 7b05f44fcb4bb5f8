/**
 * Issue 19, "end the flows that escaped": an app with NET_ADMIN inserts an ACCEPT ahead of the nat
 * OUTPUT hook and connects out directly. Strict's repair pass restores the tables, but conntrack
 * keeps the connection's un-NATed entry, so the flow would stay uncaptured; after the repair strict
 * ends it (PodFlows.end: SOCK_DESTROY, the peer gets a RST). What must survive: the proxy's own
 * connections, captured ones, and connections the pod held before it was enrolled (live
 * enrollment lets them finish, as upstream). Upstream: the rule and the flow stay. Both profiles
 * report the repair with the bypass window's upper bound (log line and histogram).
 */
import { test, expect } from '@playwright/test';
import { AgentWorld } from './harness.js';
import { credentials } from '../../../../sim/kernel/process.js';
import type { SimSocket } from '../../../../sim/kernel/socket.js';
import { escapedFlows } from '../../../../impl/node-agent/escaped-flows.js';
import type { TcpFlow } from '../../../../impl/host/pod-flows.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };
const INSERTED_ACCEPT = '*nat\n-I OUTPUT 1 -j ACCEPT\nCOMMIT\n';
const PROXY = credentials(1337, 1337, ['NET_ADMIN']);
const APP = credentials(1000, 1000, []);

function listen(w: AgentWorld, netns: string, port: number, owner = APP, label = 'server'): SimSocket {
  const s = w.kernel.socket(netns, 'tcp', 4, owner, label);
  if (owner === PROXY) w.kernel.setsockopt(s, 'SO_MARK', 0x539);
  w.kernel.bind(s, '0.0.0.0', port);
  w.kernel.listen(s);
  return s;
}

function connect(w: AgentWorld, netns: string, ip: string, port: number, owner = APP, label = 'client') {
  const s = w.kernel.socket(netns, 'tcp', 4, owner, label);
  if (owner === PROXY) w.kernel.setsockopt(s, 'SO_MARK', 0x539);
  const r = w.kernel.connect(s, ip, port);
  expect(r.outcome, r.reason).toBe('established');
  return r;
}

for (const profile of ['strict', 'upstream'] as const) {
  const strict = profile === 'strict';
  test(`${profile}: a connection opened through an inserted ACCEPT ${strict ? 'is ended after the repair, as is the uncaptured one open at enrollment; the proxy and captured connections live' : 'lives on, as does the one open at enrollment (as upstream)'}`, async () => {
    const w = new AgentWorld(profile);
    w.settings = { profile, ipv6: false, dnsCapture: false };
    await w.namespace('shop');
    await w.startAgent();
    w.startProxy();
    await w.run(100);
    // The remote: a plain sandbox with a server on 8080.
    const remote = w.sandbox('remote-uid');
    listen(w, remote.netns, 8080);
    // The pod, first outside the mesh: a connection it opens then is not captured by the rules that
    // enrollment brings (strict ends it right after its first apply; upstream leaves it to the kernel).
    const { cni, netns } = await w.pod('shop', 'web');
    expect(cni.exitCode, cni.stdout).toBe(0);
    const pre = connect(w, netns, remote.ip, 8080, APP, 'pre-enrollment');
    await w.labelNamespace('shop', AMBIENT);
    await w.run(500);
    expect(await w.annotation('shop', 'web')).toBe('enabled');
    const atEnrollment = w.log.entries.filter((e) => e.msg === 'uncaptured connections ended at enrollment');
    if (strict) {
      expect(pre.client.state, 'strict ends the uncaptured pre-enrollment connection').toBe('closed');
      expect(atEnrollment).toHaveLength(1);
      expect(atEnrollment[0]!.fields.flowsEnded).toBe(1);
      expect(atEnrollment[0]!.fields.flows).toContain(':8080 uid 1000 ESTAB: conntrack does not track it');
    } else {
      expect(pre.client.state, 'upstream ends nothing').toBe('established');
      expect(atEnrollment).toHaveLength(0);
    }
    // The proxy's listener and its own upstream connection in the pod's namespace (mark + uid).
    listen(w, netns, 15001, PROXY, 'proxy outbound');
    const proxyConn = connect(w, netns, remote.ip, 8080, PROXY, 'proxy upstream');
    const captured = connect(w, netns, remote.ip, 8080, APP, 'captured');
    expect(captured.listener?.label).toBe('proxy outbound');
    await w.run(11_000); // a repair pass finds the plan intact
    const intactBy = w.clock.now();

    w.kernel.iptablesRestore(netns, 4, INSERTED_ACCEPT, { noflush: true });
    const escaped = connect(w, netns, remote.ip, 8080, APP, 'escaped');
    expect(escaped.listener?.label, 'the inserted ACCEPT lets the app past the capture').toBe('server');
    await w.run(12_000); // the next repair pass

    const repairs = w.log.entries.filter((e) => e.msg === 'drift repaired');
    if (strict) {
      expect(escaped.client.state, 'the escaped app socket is destroyed').toBe('closed');
      expect(escaped.server?.state, "the remote's side got the RST").toBe('closed');
      expect(
        w.metrics.get('ambient_lab_agent_escaped_flows_ended_total'),
        'one at enrollment, one after the repair',
      ).toBe(2);
      expect(repairs).toHaveLength(1);
      const f = repairs[0]!.fields;
      expect(f.pod).toBe('shop/web');
      expect(f.tables).toBe('ipv4 nat');
      expect(f.foreign).toContain('-A OUTPUT -j ACCEPT');
      expect(f.flowsEnded).toBe(1);
      expect(f.flows).toContain(`:8080 uid 1000 ESTAB: conntrack tracks it without NAT to the proxy (outbound)`);
      const windowMs = f.windowMs as number;
      // From the last intact pass (≤ intactBy) to the re-apply (≤ now).
      expect(windowMs).toBeGreaterThan(0);
      expect(windowMs).toBeLessThanOrEqual(w.clock.now() - intactBy + 10_000);
      expect(w.metrics.observations('ambient_lab_agent_drift_window_seconds')).toEqual([windowMs / 1000]);
      const again = connect(w, netns, remote.ip, 8080, APP, 'after repair');
      expect(again.listener?.label, 'a new connection is captured').toBe('proxy outbound');
    } else {
      expect(escaped.client.state, 'upstream never ends it').toBe('established');
      expect(w.kernel.sendTcp(escaped.client, 'still here').delivered).toBe(true);
      expect(repairs, 'upstream sees no drift: its own chains are intact').toHaveLength(0);
      const again = connect(w, netns, remote.ip, 8080, APP, 'after');
      expect(again.listener?.label, 'the inserted ACCEPT stays').toBe('server');
    }
    for (const [what, r] of [
      ['proxy', proxyConn],
      ['captured', captured],
    ] as const)
      expect(r.client.state, `the ${what} connection lives`).toBe('established');
  });
}

test('strict: a failure to end the escaped flows keeps the drift, and the queue retries until it succeeds', async () => {
  const w = new AgentWorld('strict');
  w.settings = { profile: 'strict', ipv6: false, dnsCapture: false };
  const real = w.flows;
  let failures = 1;
  w.flows = {
    list: (n) => real.list(n),
    end: async (n, flows) => {
      if (failures-- > 0) throw new Error('ss -K: simulated failure');
      return real.end(n, flows);
    },
  };
  await w.namespace('shop', AMBIENT);
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  const remote = w.sandbox('remote-uid');
  listen(w, remote.netns, 8080);
  const { netns } = await w.pod('shop', 'web');
  await w.run(500);
  w.kernel.iptablesRestore(netns, 4, INSERTED_ACCEPT, { noflush: true });
  const escaped = connect(w, netns, remote.ip, 8080, APP, 'escaped');
  await w.run(12_000);
  const failed = w.log.entries.filter((e) => e.msg === 'reconcile failed');
  expect(failed.map((e) => String(e.fields.error)).join('\n')).toContain(
    'ending the connections that escaped while they were drifted failed: ss -K: simulated failure',
  );
  expect(escaped.client.state, 'the retry ended it').toBe('closed');
  expect(w.log.entries.filter((e) => e.msg === 'drift repaired')).toHaveLength(1);
});

test('escapedFlows(): what is left alone', () => {
  const base: TcpFlow = {
    family: 'ipv4',
    local: { ip: '10.244.1.10', port: 40000 },
    peer: { ip: '10.244.1.20', port: 8080 },
    state: 'ESTAB',
    uid: 1000,
    mark: 0,
    cookie: 'c1',
    conntrack: { initiator: 'local', nat: false, mark: 0 },
  };
  const ctx = {
    proxyUid: 1337,
    podIps: ['10.244.1.10'],
    probeSources: ['169.254.7.127'],
    inboundUncaptured: false,
  };
  const kept = (f: Partial<TcpFlow>, c: Partial<typeof ctx> = {}): boolean =>
    escapedFlows([{ ...base, ...f }], { ...ctx, ...c }).length === 0;
  expect(kept({}), 'an un-NATed app connection escaped').toBe(false);
  expect(kept({ conntrack: undefined }), 'an untracked one (NOTRACK) too').toBe(false);
  expect(kept({ uid: 1337, mark: 0x539 }), "the proxy's").toBe(true);
  expect(kept({ conntrack: { initiator: 'local', nat: true, mark: 0 } }), 'captured (NATed)').toBe(true);
  expect(kept({ conntrack: { initiator: 'peer', nat: false, mark: 0x111 } }), 'delivered by the proxy').toBe(true);
  expect(kept({ peer: { ip: '127.0.0.1', port: 8080 } }), 'loopback').toBe(true);
  expect(kept({ peer: { ip: '::ffff:10.244.1.10', port: 8080 } }), 'to its own address').toBe(true);
  expect(kept({ peer: { ip: '169.254.7.127', port: 5000 } }), 'a host probe').toBe(true);
  expect(kept({ conntrack: { initiator: 'peer', nat: false, mark: 0 } }), 'inbound past the capture').toBe(false);
  expect(
    kept({ conntrack: { initiator: 'peer', nat: false, mark: 0 } }, { inboundUncaptured: true }),
    'inbound in ingress mode',
  ).toBe(true);
  expect(kept({}, { inboundUncaptured: true }), 'outbound in ingress mode still escaped').toBe(false);
});
