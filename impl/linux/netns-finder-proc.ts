/**
 * Real adapter of the NetnsFinder port: scan /proc for a process of the pod, verify its network
 * namespace holds one of the pod's IPs, and hand back a handle that stays valid after that process
 * exits.
 *
 * Which processes belong to a pod (PodUidSource):
 *  - 'cgroup': the kubelet's cgroup path convention, shared by containerd and CRI-O with the
 *    systemd and cgroupfs drivers: a path element `pod<uid>` (cgroupfs) or
 *    `kubepods-<qos>-pod<uid with _ for ->.slice` (systemd). /proc/PID/cgroup is read.
 *  - 'environ': the netns world's marker. Its "containers" are plain processes that carry
 *    AMBIENT_LAB_POD_UID=<uid> in their environment (set by the world when it starts them, as a
 *    runtime sets the cgroup). Reading /proc/PID/environ needs root or the same uid, which the
 *    agent has. It is opt-in, because in a real cluster any process could claim a pod UID this way.
 *
 * The handle: the agent opens /proc/PID/ns/net and keeps the fd; the handle is
 * `/proc/<agent pid>/fd/<fd>`, which root child processes (nsenter, the ZDS sender) can open.
 * Holding the fd keeps the namespace object alive, so exists() does not ask "can I open it" but
 * "does anything besides this agent still use it" (a process of any pod, or a /run/netns bind
 * mount); when nothing does, the fd is closed and the answer is false (a rebooted or deleted pod).
 * One fd is kept per namespace (by inode), so repeated finds do not leak.
 */
import * as fs from 'node:fs';
import { execFile } from 'node:child_process';
import type { NetnsId } from '../api/ids.js';
import { netnsId } from '../api/ids.js';
import type { NetnsFinder } from '../host/netns-finder.js';

export type PodUidSource = 'cgroup' | 'environ';

const POD_UID_ENV = 'AMBIENT_LAB_POD_UID';

interface ProcNetnsFinderOptions {
  /** Where pod UIDs are read from; default ['cgroup']. */
  readonly sources?: readonly PodUidSource[];
  /** /proc mount (tests may point elsewhere); default '/proc'. */
  readonly proc?: string;
  /** Directory of named namespaces counted as users of a netns; default '/run/netns'. */
  readonly namedNetnsDir?: string;
}

const CGROUP_POD =
  /pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})(?:\.slice)?(?:\/|$)/;

/** The pod UID in one /proc/PID/cgroup text, per the kubelet's path conventions. */
export function podUidFromCgroup(text: string): string | undefined {
  for (const line of text.split('\n')) {
    const path = line.split(':').slice(2).join(':');
    const m = CGROUP_POD.exec(path);
    if (m) return m[1]!.replace(/_/g, '-').toLowerCase();
  }
  return undefined;
}

/** The marker in one /proc/PID/environ (NUL-separated). */
function podUidFromEnviron(raw: string): string | undefined {
  for (const kv of raw.split('\0')) if (kv.startsWith(`${POD_UID_ENV}=`)) return kv.slice(POD_UID_ENV.length + 1);
  return undefined;
}

function inodeOf(path: string): number | undefined {
  try {
    return fs.statSync(path).ino;
  } catch {
    return undefined;
  }
}

function run(argv: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(argv[0]!, argv.slice(1), { timeout: 10_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${argv.join(' ')} failed: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
  });
}

export class ProcNetnsFinder implements NetnsFinder {
  private readonly sources: readonly PodUidSource[];
  private readonly proc: string;
  private readonly named: string;
  /** netns inode → fd this process holds open. */
  private readonly held = new Map<number, number>();

  constructor(opts: ProcNetnsFinderOptions = {}) {
    this.sources = opts.sources ?? ['cgroup'];
    this.proc = opts.proc ?? '/proc';
    this.named = opts.namedNetnsDir ?? '/run/netns';
  }

  private podUidOf(pid: string): string | undefined {
    for (const s of this.sources) {
      try {
        const uid =
          s === 'cgroup'
            ? podUidFromCgroup(fs.readFileSync(`${this.proc}/${pid}/cgroup`, 'utf8'))
            : podUidFromEnviron(fs.readFileSync(`${this.proc}/${pid}/environ`, 'latin1'));
        if (uid !== undefined) return uid;
      } catch {
        // the process ended while we looked, or is not readable: not a candidate
      }
    }
    return undefined;
  }

  private pids(): string[] {
    return fs.readdirSync(this.proc).filter((d) => /^[0-9]+$/.test(d) && d !== String(process.pid));
  }

  async find(podUid: string, ips: readonly string[]): Promise<NetnsId | undefined> {
    const hostNs = inodeOf(`${this.proc}/1/ns/net`);
    const tried = new Set<number>();
    for (const pid of this.pids()) {
      const owner = this.podUidOf(pid);
      if (owner === undefined || owner.toLowerCase() !== podUid.toLowerCase()) continue;
      const nsPath = `${this.proc}/${pid}/ns/net`;
      const ino = inodeOf(nsPath);
      if (ino === undefined || ino === hostNs || tried.has(ino)) continue;
      tried.add(ino);
      let addrs: string;
      try {
        addrs = await run(['nsenter', `--net=${nsPath}`, 'ip', '-o', 'addr', 'show']);
      } catch {
        continue; // the process ended: try the next one
      }
      const have = new Set([...addrs.matchAll(/\binet6? ([0-9a-fA-F.:]+)\//g)].map((m) => m[1]!));
      if (!ips.some((ip) => have.has(ip))) continue;
      return this.hold(nsPath, ino);
    }
    return undefined;
  }

  private hold(nsPath: string, ino: number): NetnsId | undefined {
    let fd = this.held.get(ino);
    if (fd === undefined) {
      try {
        fd = fs.openSync(nsPath, 'r');
      } catch {
        return undefined;
      }
      // The process may have moved between stat and open: keep the fd only for the checked netns.
      if (fs.fstatSync(fd).ino !== ino) {
        fs.closeSync(fd);
        return undefined;
      }
      this.held.set(ino, fd);
    }
    return netnsId(`${this.proc}/${process.pid}/fd/${fd}`);
  }

  async exists(netns: NetnsId): Promise<boolean> {
    const ownPrefix = `${this.proc}/${process.pid}/fd/`;
    if (!netns.startsWith(ownPrefix))
      return inodeOf(netns) !== undefined && inodeOf(netns) !== inodeOf(`${this.proc}/1/ns/net`);
    const fd = Number(netns.slice(ownPrefix.length));
    const ino = inodeOf(netns);
    if (ino === undefined || this.held.get(ino) !== fd) return false;
    if (this.usedElsewhere(ino)) return true;
    fs.closeSync(fd);
    this.held.delete(ino);
    return false;
  }

  private usedElsewhere(ino: number): boolean {
    for (const pid of this.pids()) if (inodeOf(`${this.proc}/${pid}/ns/net`) === ino) return true;
    try {
      for (const n of fs.readdirSync(this.named)) if (inodeOf(`${this.named}/${n}`) === ino) return true;
    } catch {
      // no named namespaces on this machine
    }
    return false;
  }

  /** Close every held fd (agent shutdown). */
  close(): void {
    for (const fd of this.held.values()) fs.closeSync(fd);
    this.held.clear();
  }
}
