/**
 * The daemon of a cluster made by `ambient-lab up` (cli/commands/up.ts starts it detached, as
 * root): makes the cluster — the netns lab with the demo namespace and pods — and keeps it,
 * serving the control socket (lab-control.ts) so later CLI processes can drive it. It ends on
 * the `down` request (after taking the cluster down) or on SIGTERM / SIGINT (the same).
 * Its output goes to RUNDIR/daemon.log, its pid to RUNDIR/daemon.pid.
 *
 *   node lab-daemon-main.js '{"name":"default","nodes":2,"pods":2,"profile":"upstream","ipv6":true,"dnsCapture":true}'
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REAL_WORLD_OPTIONS, NetnsWorld } from './world.js';
import { controlSocketOf, serveLabControl } from './lab-control.js';
import { labRequestHandler } from './lab-daemon.js';
import { NetnsLab } from './world-lab.js';
import type { Profile } from '../../impl/api/profile.js';

interface DaemonOptions {
  readonly name: string;
  readonly nodes: number;
  readonly pods: number;
  readonly profile: Profile;
  readonly ipv6: boolean;
  readonly dnsCapture: boolean;
}

function log(msg: string): void {
  process.stdout.write(`${new Date().toISOString()} ${msg}\n`);
}

async function main(): Promise<void> {
  const o = JSON.parse(process.argv[2] ?? '') as DaemonOptions;
  log(`making cluster ${o.name}: ${o.nodes} node(s), ${o.pods} demo pod(s) per node, profile ${o.profile}`);
  const lab = await NetnsLab.create({
    nodes: o.nodes,
    profile: o.profile,
    name: o.name,
    ipv6: o.ipv6,
    dnsCapture: o.dnsCapture,
    // it stays up: the proxies' projected tokens (12 h) are refreshed as kubelet would
    refreshTokens: true,
  });
  const world = new NetnsWorld(lab, {
    ...REAL_WORLD_OPTIONS,
    nodes: o.nodes,
    profile: o.profile,
    ipv6: o.ipv6,
    dnsCapture: o.dnsCapture,
  });
  // set once the control socket is served; end() closes it
  const serving: { server?: { close(): Promise<void> } } = {};
  let ending = false;
  const end = async (why: string, destroy: boolean): Promise<void> => {
    if (ending) return;
    ending = true;
    log(`ending: ${why}`);
    let code = 0;
    if (destroy)
      try {
        await lab.destroy();
      } catch (e) {
        // not a quiet success: `down` (or whoever signalled) must see the cluster may be left
        log(`taking the cluster down failed: ${e instanceof Error ? e.message : String(e)}; run \`ambient-lab down\``);
        code = 1;
      }
    await serving.server?.close();
    process.exit(code);
  };
  try {
    await lab.api.create('Namespace', { metadata: { name: 'demo', labels: { 'istio.io/dataplane-mode': 'ambient' } } });
    for (const n of lab.state.nodes)
      for (let i = 0; i < o.pods; i++)
        await lab.createPod({
          namespace: 'demo',
          name: `${n.name}-app-${i}`,
          node: n.name,
          labels: { app: `app-${i}` },
          uid: 1000,
          caps: [],
          tcpPorts: [8080],
        });
  } catch (e) {
    log(`making the demo pods failed: ${(e as Error).message}`);
    try {
      await lab.destroy();
    } catch (d) {
      // both go to the log `up` prints: the first failure, and that its cleanup failed too
      log(`taking the half-made cluster down failed as well: ${d instanceof Error ? d.message : String(d)}`);
    }
    throw e;
  }
  const handle = labRequestHandler(world);
  serving.server = await serveLabControl(controlSocketOf(lab.state.runDir), async (req) => {
    log(`request ${req.op}`);
    const result = await handle(req);
    // the answer goes out first; then this process ends (the cluster is gone)
    if (req.op === 'down') setTimeout(() => void end('down', false), 100);
    return result;
  });
  process.on('SIGTERM', () => void end('SIGTERM', true));
  process.on('SIGINT', () => void end('SIGINT', true));
  // for `down` when this daemon no longer answers: it ends it by this pid (checking its command line)
  fs.writeFileSync(path.join(lab.state.runDir, 'daemon.pid'), `${process.pid}\n`);
  log(`serving ${controlSocketOf(lab.state.runDir)}`);
}

main().catch((e: unknown) => {
  log(`failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  process.exit(1);
});
