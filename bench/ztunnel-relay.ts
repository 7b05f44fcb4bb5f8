/**
 * Node proxy relay cost on the real kernel (issue 7 bench), same run, same topology:
 * throughput of one connection (BYTES, default 128 MiB) and request/response latency (1 KiB,
 * 4 connections paced at RATE=250 requests/s each: 1000 rps, the "moderate load" of Istio's
 * published latency figures) for
 *   direct     x (node-0, not in the mesh) -> y (node-1, not in the mesh)
 *   plaintext  a (node-0, enrolled)        -> y   (a's proxy, outbound passthrough: one relay)
 *   HBONE      a (node-0, enrolled)        -> c (node-1, enrolled): two proxies, mTLS 1.3 + HTTP/2
 * The three are measured RUNS times (default 5) interleaved, so a noisy neighbour hits all of
 * them alike: throughput ratios are per run (summary: their median), latency samples of all
 * runs are pooled per path before taking p99; CONNECTS (default 50) sequential new connections
 * with one exchange each give the setup cost (a TLS handshake per HBONE connection: there is
 * no connection pooling yet). Besides wall-clock figures it reports the CPU
 * time the proxies spent per MiB relayed (from /proc/PID/stat), which a busy machine disturbs
 * far less than throughput.
 * Goals: plaintext >= 0.5x direct throughput, HBONE >= 0.3x, <= 1 ms added p99 latency.
 *
 * Processes, as a deployment: one proxy per node, each a process of its own in its node's
 * namespace (ztunnel-relay-proxy.ts); PROXIES=one runs both in this process instead (the
 * arrangement before; no CPU figures then). Load runs in separate processes inside the pods
 * (ztunnel-relay-peer.ts).
 *
 *   npm run bench:ztunnel   (BYTES, ROUNDS, RATE, RUNS, CONNECTS, LATENCY_NODE_ARGS, BULK_NODE_ARGS, WARMUP, MODES=direct,plaintext,HBONE, PROXIES=split|one, PROXY_NODE_ARGS='--cpu-prof ...',
 *                            HBONE=native|tls (the tunnel; default native when its addon is built),
 *                            KERNEL_RELAY=0 (plaintext through the process), PIPE_BYTES (kernel relay pipe size))
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TRUST_DOMAIN } from '../sim/proxy-mesh/proxy-mesh.js';
import { withNetnsMesh } from '../e2e/netns/proxy-mesh.js';
import type { RelayProxyConfig } from './ztunnel-relay-proxy.js';
import { PROXY_NODE_FLAGS } from '../impl/linux/node-flags.js';
import { parseHboneKind, resolveHbone } from '../impl/linux/hbone-choice.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const peer = path.join(here, 'ztunnel-relay-peer.js');
const proxyMain = path.join(here, 'ztunnel-relay-proxy.js');
const BYTES = Number(process.env['BYTES'] ?? 128 * 1024 * 1024);
const ROUNDS = Number(process.env['ROUNDS'] ?? 400);
const RATE = Number(process.env['RATE'] ?? 250);
const RUNS = Number(process.env['RUNS'] ?? 5);
const CONNECTS = Number(process.env['CONNECTS'] ?? 50);
const split = (process.env['PROXIES'] ?? 'split') === 'split';
/**
 * V8 flags of the load processes, the same for every path. They are not under test, yet on this
 * 2-vCPU machine they were most of the latency tail: V8's helper threads (collections, and the
 * optimizing compiler for the first seconds of a pingpong) took the other CPU for 1-6 ms at a
 * time, stalling whichever process of the measured path wanted to run (perf sched, 2026-11-29).
 * Latency load (echo, pingpong, connects) collects on its own thread, rarely (a young
 * generation large enough for most of a run's allocation), and optimizes its hot code 8x sooner
 * (--interrupt-budget, default 67584), so the compiler's jobs run during the untimed warm-up
 * rounds (WARMUP) and not during the timed ones. Bulk load (source, sink) keeps V8's defaults:
 * the early tier-up made direct's own throughput 25-35 % lower. Neither collects on an idle
 * timer (the memory reducer), which is when the sink, idle after its transfer, collected during
 * the next latency rounds. Not --single-threaded or --no-opt: compiling on the main thread or not
 * at all made every path's own latency worse. LATENCY_NODE_ARGS / BULK_NODE_ARGS replace them
 * ('' for V8's defaults); the bench process itself runs with --single-threaded-gc
 * --no-memory-reducer (package.json).
 */
const nodeArgs = (name: string, fallback: readonly string[]): readonly string[] =>
  process.env[name]?.split(' ').filter(Boolean) ?? fallback;
const LATENCY_NODE_FLAGS = nodeArgs('LATENCY_NODE_ARGS', [
  '--single-threaded-gc',
  '--no-memory-reducer',
  '--max-semi-space-size=32',
  '--interrupt-budget=8192',
]);
const BULK_NODE_FLAGS = nodeArgs('BULK_NODE_ARGS', ['--no-memory-reducer']);
const CLK_TCK = 100; // USER_HZ: Linux reports /proc/PID/stat times in 1/100 s on every architecture it exports them for

interface Result {
  mbps: number;
  cpuMsPerMiB: number | undefined;
  samples: number[];
  setupP50: number;
}
type Mode = 'direct' | 'plaintext' | 'HBONE';

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

function quantile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
}

/** User + system CPU time of a process so far, in ms. */
function cpuMs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // comm may hold spaces
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK; // utime, stime (fields 14, 15)
}

await withNetnsMesh(
  async (m) => {
    const { c, pods } = m;
    const x = await c.addPod('node-0', 'x', { ipv6: false });
    const y = await c.addPod('node-1', 'y', { ipv6: false });
    const proxies: { node: string; proc: ReturnType<typeof c.spawn> }[] = [];
    const counts: Record<string, number> = {};
    const cfgDir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-bench-ztunnel-'));
    try {
      if (split) {
        const root = await m.ca.exportRoot();
        for (const [node, uids] of [
          ['node-0', ['a', 'b']],
          ['node-1', ['c']],
        ] as const) {
          const cfg: RelayProxyConfig = {
            trustDomain: TRUST_DOMAIN,
            root,
            workloads: [...m.workloads.all.values()],
            pods: uids.map((u) => ({ uid: `uid-${u}`, netnsPath: pods[u].netnsPath })),
          };
          const file = path.join(cfgDir, `${node}.json`);
          fs.writeFileSync(file, JSON.stringify(cfg), { mode: 0o600 });
          const proxyArgs = nodeArgs('PROXY_NODE_ARGS', []); // e.g. --cpu-prof
          const proc = c.spawn(c.node(node).netns, ['node', ...PROXY_NODE_FLAGS, ...proxyArgs, proxyMain, file]);
          proxies.push({ node, proc });
          await proc.waitForOutput('ready', 60_000);
        }
      }
      for (const ns of [y.netns, pods.c.netns]) {
        for (const [mode, port] of [
          ['sink', '9000'],
          ['echo', '9001'],
        ] as const)
          await c
            .spawn(ns, ['node', ...(mode === 'sink' ? BULK_NODE_FLAGS : LATENCY_NODE_FLAGS), peer, mode, port])
            .waitForOutput('ready');
      }
      const route: Record<Mode, { from: string; ip: string }> = {
        direct: { from: x.netns, ip: y.ipv4! },
        plaintext: { from: pods.a.netns, ip: y.ipv4! }, // the apps in y listen on 9000/9001: outbound passthrough
        HBONE: { from: pods.a.netns, ip: pods.c.ipv4! },
      };
      const proxyCpu = (): number => proxies.reduce((sum, p) => sum + cpuMs(p.proc.pid), 0);
      const once = async (mode: Mode): Promise<Result> => {
        const { from, ip } = route[mode];
        const source = c.spawn(from, ['node', ...BULK_NODE_FLAGS, peer, 'source', ip, '9000', String(BYTES)]);
        const cpu0 = proxyCpu();
        const t = JSON.parse(await source.waitForOutput('}', 300_000)) as { ms: number; error?: string };
        const cpu = proxyCpu() - cpu0;
        const l = JSON.parse(
          await c
            .spawn(from, [
              'node',
              ...LATENCY_NODE_FLAGS,
              peer,
              'pingpong',
              ip,
              '9001',
              String(ROUNDS),
              '4',
              String(RATE),
            ])
            .waitForOutput('}', 300_000),
        ) as { samples: number[]; error?: string };
        const k = JSON.parse(
          await c
            .spawn(from, ['node', ...LATENCY_NODE_FLAGS, peer, 'connects', ip, '9001', String(CONNECTS)])
            .waitForOutput('}', 300_000),
        ) as { p50: number; error?: string };
        if (t.error || l.error || k.error)
          throw new Error(`bench run ${mode} from ${from} to ${ip} failed: ${t.error ?? l.error ?? k.error}`);
        return {
          mbps: (BYTES * 8) / 1e6 / (t.ms / 1000),
          cpuMsPerMiB: split ? cpu / (BYTES / (1 << 20)) : undefined,
          samples: l.samples,
          setupP50: k.p50,
        };
      };
      const modes = (process.env['MODES']?.split(',') ?? ['direct', 'plaintext', 'HBONE']) as Mode[];
      if (!modes.includes('direct') || modes.some((x) => !(x in route)))
        throw new Error(`MODES must list direct and any of plaintext, HBONE (got ${process.env['MODES']})`);
      // Warm up (certificates, JIT, the proxies' first connections).
      for (const mode of ['direct', 'plaintext', 'HBONE'] as const) {
        const { from, ip } = route[mode];
        await c
          .spawn(from, ['node', ...BULK_NODE_FLAGS, peer, 'source', ip, '9000', String(8 << 20)])
          .waitForOutput('}', 60_000);
      }
      const runs: Record<Mode, Result>[] = [];
      const hbone = resolveHbone(parseHboneKind(process.env['HBONE'], 'bench:ztunnel')).use;
      console.log(
        `${split ? 'one proxy process per node' : 'both proxies in one process'}; HBONE transport ${hbone}; ${BYTES >> 20} MiB per transfer; latency ${ROUNDS} x 4 conns at ${RATE}/s each`,
      );
      for (let i = 0; i < RUNS; i++) {
        const r = {} as Record<Mode, Result>;
        for (const mode of modes) r[mode] = await once(mode);
        runs.push(r);
        console.log(
          `run ${i + 1}/${RUNS}: ${modes.map((mode) => `${mode} ${r[mode].mbps.toFixed(0)} Mbit/s${r[mode].cpuMsPerMiB !== undefined && mode !== 'direct' ? ` (proxy CPU ${r[mode].cpuMsPerMiB!.toFixed(2)} ms/MiB)` : ''}`).join(', ')}`,
        );
      }
      const pooled = (mode: Mode): number[] => runs.flatMap((r) => r[mode].samples);
      for (const mode of modes) {
        const cpu = runs.map((r) => r[mode].cpuMsPerMiB).filter((v): v is number => v !== undefined);
        console.log(
          `${mode.padEnd(10)} median ${median(runs.map((r) => r[mode].mbps))
            .toFixed(0)
            .padStart(
              6,
            )} Mbit/s  p50 ${quantile(pooled(mode), 0.5).toFixed(3)} ms  p99 ${quantile(pooled(mode), 0.99).toFixed(3)} ms (p90 ${quantile(pooled(mode), 0.9).toFixed(3)}, p99.9 ${quantile(pooled(mode), 0.999).toFixed(3)})  new connection + 1 KiB exchange p50 ${median(runs.map((r) => r[mode].setupP50)).toFixed(3)} ms${cpu.length && mode !== 'direct' ? `  proxy CPU ${median(cpu).toFixed(2)} ms/MiB` : ''}`,
        );
      }
      const ratio = (mode: Mode): number => median(runs.map((r) => r[mode].mbps / r.direct.mbps));
      const added = (mode: Mode): number => quantile(pooled(mode), 0.99) - quantile(pooled('direct'), 0.99);
      if (modes.includes('plaintext'))
        console.log(
          `plaintext throughput ratio ${ratio('plaintext').toFixed(2)}x (goal >= 0.5x); added p99 ${added('plaintext').toFixed(3)} ms (goal <= 1 ms)`,
        );
      if (modes.includes('HBONE'))
        console.log(
          `HBONE     throughput ratio ${ratio('HBONE').toFixed(2)}x (goal >= 0.3x); added p99 ${added('HBONE').toFixed(3)} ms (goal <= 1 ms)`,
        );
    } finally {
      for (const p of proxies) {
        await p.proc.stop();
        const line = p.proc.stdout.split('\n').find((l) => l.startsWith('log '));
        if (line) Object.assign(counts, JSON.parse(line.slice(4)) as Record<string, number>);
      }
      fs.rmSync(cfgDir, { recursive: true, force: true });
    }
    // The bench is void if its traffic did not go through the proxies.
    const modesSeen = split
      ? Object.keys(counts)
      : m.logs[0]!.records.filter((r) => r.event === 'forwarded').map(
          (r) => `${r.direction}:forwarded:${r.mode ?? ''}`,
        );
    for (const want of [
      'outbound:forwarded:passthrough',
      'outbound:forwarded:hbone',
      ...(split ? ['inbound-hbone:forwarded:hbone'] : []),
    ]) {
      // the warm-up covers every path
      if (!modesSeen.includes(want))
        throw new Error(`bench traffic did not go through the proxy as expected: no ${want} in the connection log`);
    }
  },
  { inProcessProxies: split ? [] : ['node-0', 'node-1'] },
);
