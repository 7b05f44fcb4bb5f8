/**
 * Simulated-kernel speed (issue 3): packets per second through a 40-rule in-pod ruleset, and TCP
 * connection setups per second, on one core, tracing off. Goals: >= 100k packets/s and
 * >= 10k setups/s. Prints each figure beside its goal and the ratio; then the same two figures
 * with upstream istio-cni's in-pod nftables document (fixtures/upstream-golden-nft/default.golden)
 * in place of the iptables ruleset, through the simulator's nftables model.
 *
 *   npm run bench:kernel
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SimKernel } from '../sim/kernel/kernel.js';
import { credentials } from '../sim/kernel/process.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const upstream = readFileSync(path.join(root, 'fixtures/rules/upstream-inpod-v4.rules'), 'utf8');
const upstreamNft = readFileSync(path.join(root, 'fixtures/upstream-golden-nft/default.golden'), 'utf8');

/** The upstream in-pod ruleset padded to 40 rules with non-matching rules in the hot chains. */
function fortyRuleRuleset(): { text: string; rules: number } {
  const base = upstream.split('\n').filter((l) => l.startsWith('-A ')).length;
  const pad: string[] = [];
  for (let i = 0; pad.length < 40 - base; i++) {
    pad.push(`-A ISTIO_PRERT -s 192.0.2.${i + 1}/32 -p tcp -m tcp --dport ${9000 + i} -j ACCEPT`);
  }
  const text = upstream.replace(
    '-A ISTIO_PRERT -m mark --mark 0x539/0xfff -j CONNMARK --set-xmark 0x111/0xfff',
    [...pad, '-A ISTIO_PRERT -m mark --mark 0x539/0xfff -j CONNMARK --set-xmark 0x111/0xfff'].join('\n'),
  );
  return { text, rules: text.split('\n').filter((l) => l.startsWith('-A ')).length };
}

/** Two pods on a bridge; pod-a has the in-pod rules (iptables-restore text, or an nft -f document). */
function buildWorld(rules: string, kind: 'iptables' | 'nft' = 'iptables'): SimKernel {
  const k = new SimKernel({ trace: false });
  k.addNetns('node');
  k.setLink('node', 'lo', true);
  k.addBridge('node', 'cni0');
  k.addAddress('node', 'cni0', '10.244.1.1/24');
  k.setLink('node', 'cni0', true);
  for (const [pod, ip, dev] of [
    ['pod-a', '10.244.1.5', 'veth-a'],
    ['pod-b', '10.244.1.6', 'veth-b'],
  ] as const) {
    k.addNetns(pod);
    k.setLink(pod, 'lo', true);
    k.addVeth(pod, 'eth0', 'node', dev);
    k.setMaster('node', dev, 'cni0');
    k.addAddress(pod, 'eth0', `${ip}/24`);
    k.setLink(pod, 'eth0', true);
    k.setLink('node', dev, true);
    k.addRoute(pod, { dst: 'default', family: 4, via: '10.244.1.1' });
  }
  if (kind === 'iptables') k.iptablesRestore('pod-a', 4, rules);
  else k.netns('pod-a').nftables.apply(rules, { source: 'default.golden' });
  k.addRule('pod-a', { family: 4, priority: 32764, fwmark: 0x111, mask: 0xfff, table: 100 });
  k.addRoute('pod-a', { dst: '0.0.0.0/0', type: 'local', dev: 'lo', table: 100 });
  const proxy = credentials(1337, 1337, ['NET_ADMIN']);
  for (const port of [15001, 15006, 15008]) {
    const s = k.socket('pod-a', 'tcp', 4, proxy, `proxy ${port}`);
    k.setsockopt(s, 'SO_MARK', 0x539);
    k.bind(s, '0.0.0.0', port);
    k.listen(s);
  }
  return k;
}

function timeIt(minMs: number, body: () => number): { ops: number; ms: number } {
  let ops = 0;
  const start = performance.now();
  let now = start;
  while (now - start < minMs) {
    ops += body();
    now = performance.now();
  }
  return { ops, ms: now - start };
}

interface KernelBench {
  readonly rules: number;
  readonly packetsPerSec: number;
  readonly setupsPerSec: number;
}

function runKernelBench(durationMs = 2000, nft = false): KernelBench {
  const { text: iptText, rules: iptRules } = fortyRuleRuleset();
  const text = nft ? upstreamNft : iptText;
  const rules = nft ? upstreamNft.split('\n').filter((l) => l.startsWith('add rule ')).length : iptRules;
  const kind = nft ? 'nft' : 'iptables';
  const app = credentials(1000, 1000);

  // Packets: data segments of one established inbound connection (pod-b -> pod-a, captured on 15006).
  const k1 = buildWorld(text, kind);
  const c = k1.socket('pod-b', 'tcp', 4, app, 'client');
  const r = k1.connect(c, '10.244.1.5', 8080);
  if (r.outcome !== 'established') throw new Error(`bench setup failed: ${r.reason}`);
  for (let i = 0; i < 2000; i++) k1.sendTcp(c, 'x'); // warm-up
  const pk = timeIt(durationMs, () => {
    for (let i = 0; i < 1000; i++) if (!k1.sendTcp(c, 'x').delivered) throw new Error('segment lost');
    return 1000;
  });

  // Setups: full three-way handshakes (3 packets each) plus close, inbound through the ruleset.
  const k2 = buildWorld(text, kind);
  const st = timeIt(durationMs, () => {
    for (let i = 0; i < 200; i++) {
      const s = k2.socket('pod-b', 'tcp', 4, app, 'client');
      const res = k2.connect(s, '10.244.1.5', 8080);
      if (res.outcome !== 'established') throw new Error(`setup failed: ${res.reason}`);
      k2.close(res.server!);
      k2.close(s);
      res.listener!.acceptQueue.length = 0;
    }
    return 200;
  });
  return { rules, packetsPerSec: (pk.ops / pk.ms) * 1000, setupsPerSec: (st.ops / st.ms) * 1000 };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const b = runKernelBench(Number(process.env['BENCH_MS'] ?? 2000));
  const row = (name: string, v: number, goal: number): string =>
    `${name.padEnd(34)} ${Math.round(v).toLocaleString('en-US').padStart(10)}   goal ${goal.toLocaleString('en-US').padStart(8)}   ratio ${(v / goal).toFixed(2)}x`;
  console.log(`simulated kernel, ${b.rules}-rule in-pod ruleset, one core, tracing off`);
  console.log(row('packets/s (established segments)', b.packetsPerSec, 100_000));
  console.log(row('TCP connection setups/s', b.setupsPerSec, 10_000));
  const n = runKernelBench(Number(process.env['BENCH_MS'] ?? 2000), true);
  console.log(`simulated kernel, upstream in-pod nftables document (${n.rules} rules), one core, tracing off`);
  console.log(row('packets/s (established segments)', n.packetsPerSec, 100_000));
  console.log(row('TCP connection setups/s', n.setupsPerSec, 10_000));
}
