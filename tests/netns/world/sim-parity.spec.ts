/**
 * The netns World against the sim World (the reference for semantics), on one dual-stack
 * topology with DNS capture: TCP and UDP (and DNS), IPv4 and IPv6, sockets and AF_PACKET, from a mesh pod with NET_RAW,
 * from a plain pod without it, and from outside. Both worlds must agree on what each attempt
 * came to (outcome, first hop and where, which apps received it and whether through a proxy —
 * which node's, acting for which pod),
 * and on the netns side the details are checked outright: dual-stack addresses from fd00::/8,
 * AF_PACKET refused (EPERM) without CAP_NET_RAW, and for UDP who received the datagram and
 * the source it saw.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';
import type {
  ConnectOptions,
  ConnectResult,
  Destination,
  PodRef,
  Profile,
  Source,
  World,
} from '../../../scenarios/world.js';
import { OUTSIDE_ADDRESS } from '../../../e2e/netns/addressing.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(900_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

/** a: mesh, root with NET_RAW (node-0); b: mesh (node-1); q: plain (node-1); r: plain, root with NET_ADMIN only (node-0). */
const a: PodRef = { namespace: 'mesh', name: 'a' };
const b: PodRef = { namespace: 'mesh', name: 'b' };
const q: PodRef = { namespace: 'plain', name: 'q' };
const r: PodRef = { namespace: 'plain', name: 'r' };
const TCP = 8080;
const UDP = 5353;

interface Case {
  readonly name: string;
  readonly from: Source;
  readonly to: Destination;
  readonly opts: ConnectOptions;
}

function cases(): Case[] {
  const out: Case[] = [];
  const pod = (p: PodRef): Source => ({ kind: 'pod', pod: p });
  for (const family of [4, 6] as const) {
    for (const proto of ['tcp', 'udp'] as const) {
      const port = proto === 'tcp' ? TCP : UDP;
      for (const raw of [false, true]) {
        const opts: ConnectOptions = { family, proto, ...(raw ? { raw } : {}) };
        const tag = `v${family} ${proto}${raw ? ' AF_PACKET' : ''}`;
        out.push({ name: `a -> b ${tag}`, from: pod(a), to: { kind: 'pod', pod: b, port }, opts });
        out.push({ name: `a -> q ${tag}`, from: pod(a), to: { kind: 'pod', pod: q, port }, opts });
        out.push({ name: `q -> a ${tag}`, from: pod(q), to: { kind: 'pod', pod: a, port }, opts });
        out.push({ name: `r -> q ${tag}`, from: pod(r), to: { kind: 'pod', pod: q, port }, opts });
      }
      if (proto === 'udp')
        out.push({
          name: `a -> q v${family} udp 53 (DNS)`,
          from: pod(a),
          to: { kind: 'pod', pod: q, port: 53 },
          opts: { family, proto },
        });
      out.push({
        name: `outside -> q v${family} ${proto}`,
        from: { kind: 'outside' },
        to: { kind: 'pod', pod: q, port },
        opts: { family, proto },
      });
      // The outside client may use AF_PACKET too (root with every capability, in both worlds).
      out.push({
        name: `outside -> a v${family} ${proto} AF_PACKET`,
        from: { kind: 'outside' },
        to: { kind: 'pod', pod: a, port },
        opts: { family, proto, raw: true },
      });
    }
  }
  return out;
}

async function build(w: World): Promise<void> {
  await w.createNamespace('mesh', MESH);
  await w.createNamespace('plain');
  await w.createPod({ ...a, node: 'node-0', app: { uid: 0, caps: ['NET_RAW'], tcpPorts: [TCP], udpPorts: [UDP] } });
  await w.createPod({ ...b, node: 'node-1', app: { uid: 1000, caps: [], tcpPorts: [TCP], udpPorts: [UDP] } });
  await w.createPod({ ...q, node: 'node-1', app: { uid: 1000, caps: [], tcpPorts: [TCP], udpPorts: [UDP, 53] } });
  await w.createPod({ ...r, node: 'node-0', app: { uid: 0, caps: ['NET_ADMIN'], tcpPorts: [TCP], udpPorts: [UDP] } });
  await w.settle();
}

/** What both worlds must agree on (addresses and ports chosen by each world are left out). */
function shape(c: ConnectResult): string {
  const ref = (p: PodRef | { node: string } | undefined): string =>
    p === undefined ? '-' : 'node' in p ? `node ${p.node}` : `${p.namespace}/${p.name}`;
  const dels = c.deliveries
    .map(
      (d) =>
        `${ref(d.pod)}:${d.port}${d.viaProxy ? ` via the proxy of ${d.proxyNode ?? '?'} for ${ref(d.proxyFor)}` : ' direct'}`,
    )
    .sort();
  return `${c.outcome}${c.outcome === 'error' ? ` (${c.error})` : ''} first hop ${c.acceptedBy ?? '-'} in ${ref(c.acceptedIn)}; deliveries [${dels.join(', ')}]`;
}

async function runAll(w: World): Promise<Map<string, ConnectResult>> {
  const out = new Map<string, ConnectResult>();
  for (const c of cases()) out.set(c.name, await w.connect(c.from, c.to, c.opts));
  return out;
}

for (const profile of ['strict', 'upstream'] as Profile[]) {
  test(`${profile}: netns and sim agree on TCP/UDP × v4/v6 × socket/AF_PACKET attempts`, async () => {
    const sim = await createSimWorld({
      nodes: 2,
      profile,
      kernelVersion: '6.1',
      ipv6: true,
      dnsCapture: true,
      seed: 3,
    });
    let expected: Map<string, ConnectResult>;
    try {
      await build(sim);
      expected = await runAll(sim);
    } finally {
      await sim.close();
    }
    await withNetnsWorld({ profile, ipv6: true, dnsCapture: true }, async (w) => {
      await build(w);
      const pods = await w.pods();
      for (const p of pods) {
        // why a pod has no address, when it has none: its phase and the sandbox error the lab recorded
        const why = `${p.name}: phase ${p.phase}, started ${p.started}, sandbox error ${w.lab.state.pods[`${p.namespace}/${p.name}`]?.error ?? '-'}`;
        expect(
          p.ips.filter((ip) => !ip.includes(':')),
          `${p.name} v4 (${why})`,
        ).toHaveLength(1);
        expect(
          p.ips.filter((ip) => ip.startsWith('fd')),
          `${p.name} v6 from fd00::/8`,
        ).toHaveLength(1);
      }
      const got = await runAll(w);
      const diffs: string[] = [];
      for (const [name, sr] of expected) {
        const nr = got.get(name)!;
        if (shape(sr) !== shape(nr))
          diffs.push(`${name}:\n  sim   ${shape(sr)}\n  netns ${shape(nr)}\n  ${nr.trace ?? ''}`);
      }
      expect(diffs.join('\n'), 'netns results that differ from the sim').toBe('');

      // The details, outright.
      const ipOf = (ref: PodRef, family: 4 | 6): string =>
        pods.find((p) => p.name === ref.name)!.ips.find((ip) => ip.includes(':') === (family === 6))!;
      for (const family of [4, 6] as const) {
        // Without CAP_NET_RAW (q runs as uid 1000; r has NET_ADMIN only) the packet socket is refused.
        for (const who of ['q -> a', 'r -> q']) {
          for (const proto of ['tcp', 'udp']) {
            const x = got.get(`${who} v${family} ${proto} AF_PACKET`)!;
            expect(x.outcome).toBe('error');
            expect(x.error).toBe('socket(AF_PACKET): EPERM');
          }
        }
        // With it, a datagram crafted below the mesh's rules reaches the plain pod's app directly,
        // which saw a's own address.
        const rawUdp = got.get(`a -> q v${family} udp AF_PACKET`)!;
        expect(rawUdp.outcome).toBe('delivered');
        expect(rawUdp.acceptedBy).toBe('app');
        expect(rawUdp.deliveries).toHaveLength(1);
        expect(rawUdp.deliveries[0]!.peer.startsWith(family === 6 ? `[${ipOf(a, 6)}]:` : `${ipOf(a, 4)}:`)).toBe(true);
        // UDP from outside: received by q's app, which saw the outside client's address.
        const out = got.get(`outside -> q v${family} udp`)!;
        expect(out.outcome).toBe('delivered');
        expect(out.acceptedIn).toEqual(q);
        const outsideIp = family === 6 ? `[${OUTSIDE_ADDRESS.ipv6}]:` : `${OUTSIDE_ADDRESS.ipv4}:`;
        expect(out.deliveries.map((d) => d.peer.slice(0, outsideIp.length))).toEqual([outsideIp]);
        // A v6 connection out of the mesh pod is captured like a v4 one.
        expect(got.get(`a -> q v${family} tcp`)!.acceptedBy).toBe('proxy-outbound');
      }
    });
  });
}
