/**
 * A small ZDS world for the protocol tests: virtual clock, in-memory network, a recording
 * logger, an agent-side ZdsServer and proxy-side ZdsClients whose handler records what it
 * serves. Everything runs on the VirtualClock; `run(ms)` moves time and lets promises settle.
 */
import { netnsId, podUid, type NetnsId, type PodUid } from '../../../impl/api/ids.js';
import type { WorkloadInfo } from '../../../impl/api/zds/messages.js';
import type { Logger, LogFields } from '../../../impl/host/log.js';
import type { ZdsNetnsHandle, ZdsPeerCredentials } from '../../../impl/host/zds-transport.js';
import { ZdsServer, type ZdsServerEvent, type ZdsSnapshotEntry } from '../../../impl/node-agent/zds-server.js';
import { ZdsClient, type ZdsClientEvent, type ZdsWorkloadHandler } from '../../../impl/ztunnel/zds-client.js';
import { SimZdsNetwork } from '../../../sim/zds/sim-zds-network.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { VirtualClock } from '../../../sim/time/virtual-clock.js';

export const ADDRESS = '/var/run/ztunnel/ztunnel.sock';
const PROXY_UID = 1337;
export const PROXY: ZdsPeerCredentials = { pid: 100, uid: PROXY_UID, gid: 1337 };

interface LogLine {
  level: string;
  msg: string;
  fields: LogFields;
}

function memoryLogger(lines: LogLine[], base: LogFields = {}): Logger {
  const at =
    (level: string) =>
    (msg: string, fields: LogFields = {}): void => {
      lines.push({ level, msg, fields: { ...base, ...fields } });
    };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (f) => memoryLogger(lines, { ...base, ...f }),
  };
}

export function pod(n: number, withNetns = true): ZdsSnapshotEntry {
  const uid = podUid(`pod-${n}`);
  const info: WorkloadInfo = { name: `app-${n}`, namespace: 'default', serviceAccount: 'sa' };
  return withNetns ? { uid, info, netns: netnsId(`sim-netns-pod-${n}`) } : { uid, info };
}

/** The proxy's side as a recording fake: which pods it serves, in which netns. */
class FakeProxy implements ZdsWorkloadHandler {
  readonly served = new Map<PodUid, { info: WorkloadInfo; netns: ZdsNetnsHandle }>();
  readonly calls: string[] = [];
  /** uid -> error text the next onAdd for it fails with. */
  readonly failAdd = new Map<PodUid, string>();

  onAdd(uid: PodUid, info: WorkloadInfo, netns: ZdsNetnsHandle): Promise<void> {
    this.calls.push(`add ${uid} ${netns.identity}`);
    const fail = this.failAdd.get(uid);
    if (fail !== undefined) return Promise.reject(new Error(fail));
    const old = this.served.get(uid);
    if (old && old.netns.identity !== netns.identity) old.netns.close();
    if (old && old.netns.identity === netns.identity)
      netns.close(); // same netns: keep the old handle
    else this.served.set(uid, { info, netns });
    return Promise.resolve();
  }

  onKeep(uid: PodUid): Promise<void> {
    this.calls.push(`keep ${uid}`);
    return Promise.resolve();
  }

  onDel(uid: PodUid): Promise<void> {
    this.calls.push(`del ${uid}`);
    this.served.get(uid)?.netns.close();
    this.served.delete(uid);
    return Promise.resolve();
  }

  onSnapshotSent(named: ReadonlySet<PodUid>): Promise<void> {
    this.calls.push(`snapshot-sent [${[...named].sort().join(' ')}]`);
    for (const [uid, s] of this.served) {
      if (!named.has(uid)) {
        s.netns.close();
        this.served.delete(uid);
      }
    }
    return Promise.resolve();
  }

  servedUids(): string[] {
    return [...this.served.keys()].sort();
  }
}

export class ZdsWorld {
  readonly clock = new VirtualClock();
  readonly net = new SimZdsNetwork(this.clock);
  readonly logs: LogLine[] = [];
  readonly serverEvents: ZdsServerEvent[] = [];
  /** The agent's enrolled pods, as the snapshot provider reports them. */
  readonly enrolled = new Map<PodUid, ZdsSnapshotEntry>();
  readonly server: ZdsServer;

  constructor(opts: { allowedUids?: number[]; ackTimeoutMs?: number } = {}) {
    this.server = new ZdsServer({
      transport: this.net.endpoint({ pid: 1, uid: 0, gid: 0 }),
      address: ADDRESS,
      clock: this.clock,
      log: memoryLogger(this.logs, { side: 'agent' }),
      allowedUids: opts.allowedUids ?? [PROXY_UID],
      snapshot: () => [...this.enrolled.values()],
      ...(opts.ackTimeoutMs === undefined ? {} : { ackTimeoutMs: opts.ackTimeoutMs }),
    });
    this.server.on((e) => this.serverEvents.push(e));
  }

  enroll(...entries: ZdsSnapshotEntry[]): void {
    for (const e of entries) this.enrolled.set(e.uid, e);
  }

  client(
    creds: ZdsPeerCredentials = PROXY,
    seed = 1,
  ): { client: ZdsClient; proxy: FakeProxy; events: ZdsClientEvent[] } {
    const proxy = new FakeProxy();
    const events: ZdsClientEvent[] = [];
    const client = new ZdsClient({
      transport: this.net.endpoint(creds),
      address: ADDRESS,
      clock: this.clock,
      random: new SeededRandom(seed),
      log: memoryLogger(this.logs, { side: 'proxy', pid: creds.pid }),
      handler: proxy,
    });
    client.on((e) => events.push(e));
    return { client, proxy, events };
  }

  /** Move virtual time forward by `ms`, firing due timers in order and letting promises settle. */
  async run(ms: number): Promise<void> {
    const until = this.clock.now() + ms;
    await flush();
    for (;;) {
      const due = this.clock.nextDue();
      if (due === undefined || due > until) break;
      this.clock.fireNext();
      await flush();
    }
    this.clock.advance(until - this.clock.now());
    await flush();
  }

  /** Settle a promise while time runs; returns its outcome as data. */
  async outcome<T>(p: Promise<T>, ms = 100): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
    let result: { ok: true; value: T } | { ok: false; error: unknown } | undefined;
    p.then(
      (value) => {
        result = { ok: true, value };
      },
      (error: unknown) => {
        result = { ok: false, error };
      },
    );
    await this.run(ms);
    if (!result) throw new Error(`promise still pending after ${ms} ms of virtual time`);
    return result;
  }

  types(): string[] {
    return this.serverEvents.map((e) => e.type);
  }
}

async function flush(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise<void>((r) => setImmediate(r));
}

export const nsOf = (n: number): NetnsId => netnsId(`sim-netns-pod-${n}`);
