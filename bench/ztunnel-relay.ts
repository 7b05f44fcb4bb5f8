/**
 * Node proxy relay cost on the real kernel (issue 7 bench), same run, same topology:
 * throughput of one connection (256 MiB) and request/response latency (1 KiB, 4 connections,
 * moderate load) for
 *   direct     x (node-0, not in the mesh) -> y (node-1, not in the mesh)
 *   plaintext  a (node-0, enrolled)        -> y   (a's proxy, outbound passthrough: one relay)
 *   HBONE      a (node-0, enrolled)        -> c (node-1, enrolled): two proxies, mTLS 1.3 + HTTP/2
 * Goals: plaintext >= 0.5x direct throughput, HBONE >= 0.3x, <= 1 ms added p99 latency.
 * Load runs in separate processes inside the pods; both proxies run in this process.
 *
 *   npm run bench:ztunnel
 */
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { withNetnsMesh } from '../tests/netns/ztunnel/fixture.js';

const peer = path.join(path.dirname(fileURLToPath(import.meta.url)), 'ztunnel-relay-peer.js');
const BYTES = Number(process.env['BYTES'] ?? 256 * 1024 * 1024);
const ROUNDS = Number(process.env['ROUNDS'] ?? 2000);

interface Result { mbps: number; p50: number; p99: number }

await withNetnsMesh(async (m) => {
  const { c, pods } = m;
  const x = await c.addPod('node-0', 'x', { ipv6: false });
  const y = await c.addPod('node-1', 'y', { ipv6: false });
  for (const ns of [y.netns, pods.c.netns]) {
    for (const [mode, port] of [['sink', '9000'], ['echo', '9001']] as const) await c.spawn(ns, ['node', peer, mode, port]).waitForOutput('ready');
  }
  const run = async (from: string, ip: string): Promise<Result> => {
    // Warm up (certificates, JIT), then measure.
    await c.spawn(from, ['node', peer, 'source', ip, '9000', String(8 << 20)]).waitForOutput('}', 60_000);
    const t = JSON.parse(await c.spawn(from, ['node', peer, 'source', ip, '9000', String(BYTES)]).waitForOutput('}', 300_000)) as { ms: number; error?: string };
    const l = JSON.parse(await c.spawn(from, ['node', peer, 'pingpong', ip, '9001', String(ROUNDS), '4']).waitForOutput('}', 300_000)) as { p50: number; p99: number; error?: string };
    if (t.error || l.error) throw new Error(`bench run from ${from} to ${ip} failed: ${t.error ?? l.error}`);
    return { mbps: (BYTES * 8) / 1e6 / (t.ms / 1000), p50: l.p50, p99: l.p99 };
  };
  // The apps in y listen on 9000/9001; a -> y is outbound passthrough, a -> c is HBONE.
  const direct = await run(x.netns, y.ipv4!);
  const plain = await run(pods.a.netns, y.ipv4!);
  const hbone = await run(pods.a.netns, pods.c.ipv4!);
  const fwd = m.logs[0]!.records.filter((r) => r.event === 'forwarded' && r.direction === 'outbound');
  if (!fwd.some((r) => r.mode === 'passthrough') || !fwd.some((r) => r.mode === 'hbone')) throw new Error('bench traffic did not go through the proxy as expected');
  const row = (name: string, r: Result): string => `${name.padEnd(10)} ${r.mbps.toFixed(0).padStart(7)} Mbit/s  p50 ${r.p50.toFixed(3)} ms  p99 ${r.p99.toFixed(3)} ms`;
  console.log(row('direct', direct));
  console.log(row('plaintext', plain));
  console.log(row('HBONE', hbone));
  console.log(`plaintext throughput ratio ${(plain.mbps / direct.mbps).toFixed(2)}x (goal >= 0.5x); added p99 ${(plain.p99 - direct.p99).toFixed(3)} ms (goal <= 1 ms)`);
  console.log(`HBONE     throughput ratio ${(hbone.mbps / direct.mbps).toFixed(2)}x (goal >= 0.3x); added p99 ${(hbone.p99 - direct.p99).toFixed(3)} ms (goal <= 1 ms)`);
});
