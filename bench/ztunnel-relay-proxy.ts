/**
 * One node's proxy as a process of its own, for bench/ztunnel-relay.ts: a real deployment runs
 * one proxy per node, so the two proxies of an HBONE path must not share an event loop (or a
 * CPU core) in the bench either. Same adapters as the proxy main (LinuxSockets, the HBONE transport it picks, on a
 * shared mesh root), with the fixture's allow-all authorizer and static workload index.
 *
 *   node ztunnel-relay-proxy.js CONFIG.json    prints "ready" once every pod is served; on
 *                                              SIGTERM a JSON line counting its connection-log
 *                                              records by direction:event:mode, then exits
 */
import * as fs from 'node:fs';
import { netnsId, podUid } from '../impl/api/ids.js';
import { SystemClock } from '../impl/linux/clock.js';
import { hboneTransport, parseHboneKind, resolveHbone } from '../impl/linux/hbone-choice.js';
import { MeshCa } from '../impl/linux/mesh-ca.js';
import { LinuxSockets } from '../impl/linux/sockets.js';
import { NodeProxy } from '../impl/ztunnel/node-proxy.js';
import { MemoryConnectionLog, type ProxyWorkload } from '../impl/ztunnel/proxy-deps.js';
import { MemoryLogger } from '../sim/log/memory-logger.js';
import { FakeAuthorizer, FakeWorkloads } from '../sim/proxy-mesh/proxy-mesh.js';

/** What the bench hands the proxy process. */
export interface RelayProxyConfig {
  readonly trustDomain: string;
  readonly root: { readonly certPem: string; readonly keyPem: string };
  readonly workloads: readonly ProxyWorkload[];
  /** The pods this node serves: uid and the netns path. */
  readonly pods: readonly { readonly uid: string; readonly netnsPath: string }[];
}

// A name of its own in ps/perf (comm), so a trace can tell the proxies from the load processes.
process.title = 'al-bench-proxy';
const file = process.argv[2];
if (!file) {
  console.error('usage: ztunnel-relay-proxy CONFIG.json');
  process.exit(2);
}
const cfg = JSON.parse(fs.readFileSync(file, 'utf8')) as RelayProxyConfig;
const workloads = new FakeWorkloads();
for (const w of cfg.workloads) workloads.all.set(w.uid, w);
const connectionLog = new MemoryConnectionLog();
const proxy = new NodeProxy({
  // KERNEL_RELAY=0: plaintext relayed through the process; PIPE_BYTES: the kernel relay's pipe size (A/B runs).
  sockets: new LinuxSockets({
    kernelRelay: process.env['KERNEL_RELAY'] !== '0',
    ...(process.env['PIPE_BYTES'] ? { kernelRelayPipeBytes: Number(process.env['PIPE_BYTES']) } : {}),
  }),
  hbone: hboneTransport(
    resolveHbone(parseHboneKind(process.env['HBONE'], 'bench proxy')).use,
    await MeshCa.load(cfg.trustDomain, cfg.root.certPem, cfg.root.keyPem),
  ),
  authorizer: new FakeAuthorizer(),
  workloads,
  clock: new SystemClock(),
  log: new MemoryLogger(),
  trustDomain: cfg.trustDomain,
  connectionLog,
});
for (const p of cfg.pods) {
  const w = workloads.byUid(podUid(p.uid));
  if (!w) throw new Error(`bench proxy config names pod ${p.uid} but no workload with that uid`);
  await proxy.onAdd(
    podUid(p.uid),
    { name: w.name, namespace: w.namespace, serviceAccount: w.serviceAccount },
    {
      netns: netnsId(p.netnsPath),
      identity: p.netnsPath,
      close: () => undefined,
    },
  );
}
console.log('ready');
process.once('SIGTERM', () => {
  const counts: Record<string, number> = {};
  for (const r of connectionLog.records)
    counts[`${r.direction}:${r.event}:${r.mode ?? ''}`] =
      (counts[`${r.direction}:${r.event}:${r.mode ?? ''}`] ?? 0) + 1;
  console.log(`log ${JSON.stringify(counts)}`);
  void proxy.shutdown('immediate').then(() => process.exit(0));
});
