/**
 * Real adapter of the PodFlows port (impl/host/pod-flows.ts): iproute2's `ss` and conntrack-tools'
 * `conntrack`, each run as `nsenter --net=<NetnsId path> <tool>` like netns-rules.ts.
 *
 * - list: `ss -tnHe -4|-6 state connected` gives each socket's addresses, state, uid (printed when
 *   not 0), SO_MARK (`fwmark:`, printed when not 0) and cookie (`sk:`); `conntrack -L -f ipv4|ipv6
 *   -p tcp` gives the entries of the namespace, joined to sockets by tuple (a v4-mapped socket
 *   address is joined as its IPv4 address). Entries in other zones (`zone=N`) are not the socket's.
 * - end: `ss -K` with the flow's exact tuple (SOCK_DESTROY: needs CONFIG_INET_DIAG_DESTROY; the
 *   owner's next call fails with ECONNABORTED and the peer gets a RST, checked on the lab kernel).
 *   A socket that is still listed with the same cookie afterwards is an error, so a kernel
 *   without SOCK_DESTROY is reported, not taken for success.
 */
import { nsenterRun, nsenterText, type NsenterResult } from './nsenter.js';
import type { NetnsId } from '../api/ids.js';
import type { IpFamily } from '../host/netns-rules.js';
import type { FlowConntrack, PodFlows, TcpFlow } from '../host/pod-flows.js';
import { formatIp, tryParseIpUnmapped } from '../api/ip/address.js';

class PodFlowsError extends Error {
  constructor(netns: string, command: string, detail: string, hint: string) {
    super(`netns ${netns}: ${command} failed: ${detail.trim() || '(no stderr)'}. ${hint}`);
  }
}

interface SockRow {
  readonly state: string;
  readonly local: { ip: string; port: number };
  readonly peer: { ip: string; port: number };
  readonly uid: number;
  readonly mark: number;
  readonly cookie: string;
}

interface CtRow {
  readonly orig: string;
  readonly reply: string;
  readonly mark: number;
}

const FLAG: Record<IpFamily, string> = { ipv4: '-4', ipv6: '-6' };

/** `10.0.0.1:80`, `[fd00::1]:80`, `[fe80::1]%eth0:80`, `10.0.0.1%eth0:80` → ip and port. */
function parseSsAddress(text: string): { ip: string; port: number } | undefined {
  const m = /^\[?([^\]%]+?)\]?(?:%[^:]+)?:(\d+)$/.exec(text);
  if (!m) return undefined;
  return { ip: m[1]!, port: Number(m[2]) };
}

/** One `ss -tnHe state connected` line; undefined for a line that is not a socket. */
export function parseSsLine(line: string): SockRow | undefined {
  const f = line.trim().split(/\s+/);
  if (f.length < 5) return undefined;
  const [state = '', , , localText = '', peerText = ''] = f;
  const local = parseSsAddress(localText);
  const peer = parseSsAddress(peerText);
  if (!local || !peer) return undefined;
  const field = (name: string): string | undefined => f.find((x) => x.startsWith(`${name}:`))?.slice(name.length + 1);
  return {
    state,
    local,
    peer,
    uid: Number(field('uid') ?? '0'),
    mark: Number(field('fwmark') ?? '0'),
    cookie: field('sk') ?? '',
  };
}

/** One `conntrack -L` TCP line in the default zone; undefined otherwise. */
export function parseConntrackLine(line: string): CtRow | undefined {
  if (/\bzone=\d+/.test(line) && !/\bzone=0\b/.test(line)) return undefined;
  const tuples = [...line.matchAll(/src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+)/g)];
  if (tuples.length < 2) return undefined;
  const key = (m: RegExpMatchArray): string => tupleKey(m[1]!, Number(m[3]), m[2]!, Number(m[4]));
  const markText = /\bmark=(\d+)/.exec(line)?.[1];
  return { orig: key(tuples[0]!), reply: key(tuples[1]!), mark: Number(markText ?? '0') };
}

function canonical(ip: string): string {
  const a = tryParseIpUnmapped(ip);
  return a ? formatIp(a) : ip;
}

function tupleKey(src: string, sport: number, dst: string, dport: number): string {
  return `${canonical(src)}|${sport}|${canonical(dst)}|${dport}`;
}

/** What conntrack says about the socket's connection (see the port). */
export function conntrackOf(s: SockRow, entries: readonly CtRow[]): FlowConntrack | undefined {
  const out = tupleKey(s.local.ip, s.local.port, s.peer.ip, s.peer.port);
  const back = tupleKey(s.peer.ip, s.peer.port, s.local.ip, s.local.port);
  for (const e of entries) {
    const inverse = (t: string): string => {
      const [a, ap, b, bp] = t.split('|');
      return `${b}|${bp}|${a}|${ap}`;
    };
    const nat = e.reply !== inverse(e.orig);
    if (e.orig === out || e.reply === back) return { initiator: 'local', nat, mark: e.mark };
    if (e.orig === back || e.reply === out) return { initiator: 'peer', nat, mark: e.mark };
  }
  return undefined;
}

export class LinuxPodFlows implements PodFlows {
  private readonly timeoutMs: number;

  constructor(opts: { timeoutMs?: number } = {}) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
  }

  async list(netns: NetnsId): Promise<TcpFlow[]> {
    const socks: { family: IpFamily; row: SockRow }[] = [];
    for (const family of ['ipv4', 'ipv6'] as const)
      for (const row of await this.sockets(netns, family)) if (row.state !== 'TIME-WAIT') socks.push({ family, row }); // no owner left: nothing to end
    if (socks.length === 0) return [];
    const ct = await this.conntrack(netns);
    return socks.map(({ family, row }) => ({ family, ...row, conntrack: conntrackOf(row, ct) }));
  }

  async end(netns: NetnsId, flows: readonly TcpFlow[]): Promise<void> {
    for (const f of flows) {
      const at = (e: { ip: string; port: number }): string =>
        e.ip.includes(':') ? `[${e.ip}]:${e.port}` : `${e.ip}:${e.port}`;
      const filter = ['src', at(f.local), 'dst', at(f.peer)];
      const argv = ['ss', '-K', '-tnHe', FLAG[f.family], ...filter];
      const res = await this.run(netns, argv);
      if (!res.ok)
        throw new PodFlowsError(
          netns,
          nsenterText(netns, argv),
          res.stderr,
          'The connection was not ended; the agent retries on its next pass. Check that ss (Debian package iproute2) is installed and the agent has CAP_NET_ADMIN.',
        );
      const still = (await this.sockets(netns, f.family, filter)).filter((s) => s.cookie === f.cookie);
      if (still.length > 0)
        throw new PodFlowsError(
          netns,
          nsenterText(netns, argv),
          `socket sk:${f.cookie} is still there after SOCK_DESTROY`,
          'The kernel did not destroy it: ending sockets needs CONFIG_INET_DIAG_DESTROY=y and CAP_NET_ADMIN in the namespace.',
        );
    }
  }

  private async sockets(netns: NetnsId, family: IpFamily, filter: readonly string[] = []): Promise<SockRow[]> {
    const argv = ['ss', '-tnHe', FLAG[family], 'state', 'connected', ...filter];
    const res = await this.run(netns, argv);
    if (!res.ok)
      throw new PodFlowsError(
        netns,
        nsenterText(netns, argv),
        res.stderr,
        'Without the socket list the agent cannot tell which connections escaped; it retries on its next pass. Check that ss (Debian package iproute2) is installed.',
      );
    return res.stdout
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const row = parseSsLine(l);
        if (!row)
          throw new PodFlowsError(
            netns,
            `\`${argv.join(' ')}\``,
            `cannot parse ${JSON.stringify(l)}`,
            'ss printed a line this adapter does not know; report it with the iproute2 version.',
          );
        return row;
      });
  }

  private async conntrack(netns: NetnsId): Promise<CtRow[]> {
    const rows: CtRow[] = [];
    for (const family of ['ipv4', 'ipv6'] as const) {
      const argv = ['conntrack', '-L', '-f', family, '-p', 'tcp'];
      const res = await this.run(netns, argv);
      if (!res.ok)
        throw new PodFlowsError(
          netns,
          nsenterText(netns, argv),
          res.stderr,
          'Without conntrack the agent cannot tell a captured connection from an escaped one; it retries on its next pass. Install the conntrack tool (Debian package conntrack) in the agent image.',
        );
      // conntrack says how many entries it printed (stderr): a listing that disagrees was cut short.
      const lines = res.stdout.split('\n').filter((l) => l.startsWith('tcp '));
      const shown = /(\d+) flow entries have been shown/.exec(res.stderr)?.[1];
      if (shown === undefined || Number(shown) !== lines.length)
        throw new PodFlowsError(
          netns,
          nsenterText(netns, argv),
          `printed ${lines.length} tcp entries, its summary says ${shown ?? '(no summary)'}: ${res.stderr.trim()}`,
          'The listing is incomplete; the next attempt lists again.',
        );
      for (const l of lines) {
        const r = parseConntrackLine(l);
        if (r) rows.push(r);
      }
    }
    return rows;
  }

  private run(netns: NetnsId, argv: readonly string[]): Promise<NsenterResult> {
    return nsenterRun(netns, argv, { timeoutMs: this.timeoutMs });
  }
}
