/**
 * Raw (AF_PACKET) attempts in the kind world. The netns world's probe sends the frame
 * (`raw-send`, e2e/netns/probe-protocol.ts) and needs the device and the next hop's MAC, which
 * only the source's netns knows: a small node script run through the same launcher as the probe
 * (kubectl exec into the source container, or a container on the kind network for outside) asks
 * `ip route get` and makes the kernel resolve the neighbour with an ordinary UDP datagram (no
 * privilege needed), then reads `ip neigh`. A TCP SYN sent raw never completes (the sender's
 * kernel resets it), so a SYN-ACK is attributed from the destination's conntrack entry, read on
 * the destination's node in the pod's sandbox netns (which listener port took it after NAT).
 */
import { parseConntrackList } from '../netns/observe.js';
import type { Acceptor, Delivery, PodRef } from '../../scenarios/world.js';
import { ep } from './attribution.js';

/** Where a frame to a destination leaves the source netns. */
interface NextHop {
  readonly dev: string;
  readonly mac: string;
}

const ADDRESS = /^[0-9a-f.:]+$/i;

/** The node program (run as `node -e <script> <dst>`) that prints the next hop as one JSON line. */
export const NEXT_HOP_SCRIPT = [
  "const { execFileSync } = require('node:child_process');",
  "const dgram = require('node:dgram');",
  'const dst = process.argv[1];',
  "const out = (o) => { process.stdout.write(JSON.stringify(o) + '\\n'); };",
  "const v6 = dst.includes(':');",
  'let r;',
  "try { r = JSON.parse(execFileSync('ip', [...(v6 ? ['-6'] : []), '-j', 'route', 'get', dst], { encoding: 'utf8' }))[0]; } catch (e) { out({ error: 'ip route get ' + dst + ': ' + e.message }); process.exit(0); }",
  "if (!r || !r.dev) { out({ error: 'no route to ' + dst }); process.exit(0); }",
  'const hop = r.gateway || dst;',
  "const s = dgram.createSocket(v6 ? 'udp6' : 'udp4');",
  "s.send('al-next-hop', 9, hop, () => setTimeout(() => {",
  '  s.close();',
  '  let n = [];',
  "  try { n = JSON.parse(execFileSync('ip', [...(v6 ? ['-6'] : []), '-j', 'neigh', 'show', hop, 'dev', r.dev], { encoding: 'utf8' })); } catch {}",
  '  const mac = (n.find((x) => x.lladdr) || {}).lladdr;',
  "  out(mac ? { dev: r.dev, mac } : { error: 'no neighbour entry for ' + hop + ' on ' + r.dev });",
  '}, 300));',
].join('\n');

export function nextHopCommand(dst: string): string[] {
  if (!ADDRESS.test(dst)) throw new Error(`next hop of ${JSON.stringify(dst)}: not an address`);
  return ['node', '-e', NEXT_HOP_SCRIPT, dst];
}

/** The script's answer: the hop, or why there is none (an error the attempt reports). */
export function parseNextHop(stdout: string): NextHop | string {
  for (const line of stdout.split('\n').reverse()) {
    try {
      const o = JSON.parse(line) as { dev?: unknown; mac?: unknown; error?: unknown };
      if (typeof o.dev === 'string' && typeof o.mac === 'string' && /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i.test(o.mac))
        return { dev: o.dev, mac: o.mac };
      if (typeof o.error === 'string') return o.error;
    } catch {
      // not the script's line
    }
  }
  return `the next-hop script printed no answer: ${stdout.trim().slice(0, 200) || '(nothing)'}`;
}

/**
 * The node script that finds which listener port answered a raw SYN src:sport: conntrack's
 * listing in the destination sandbox's netns (`netnsPath`, from crictl), passed through whole —
 * stdout lines as `al-ct-out ...`, stderr lines as `al-ct-err ...`, then `al-ct-exit <code>` —
 * so parseRawPort checks the exit code and conntrack's own entry count (a failing or missing
 * conntrack is an error, never "no entry"). No `al-ct-exit` line: the sandbox was not found.
 */
export function rawConntrackScript(podUid: string, src: string, sport: number): string {
  if (!/^[0-9a-f-]+$/i.test(podUid) || !ADDRESS.test(src) || !Number.isInteger(sport))
    throw new Error(`raw conntrack lookup: bad pod uid / source ${podUid} ${src}:${sport}`);
  const family = src.includes(':') ? 'ipv6' : 'ipv4';
  return [
    'ids=$(crictl pods -q --state ready) || { echo "crictl pods -q --state ready failed (exit $?)" >&2; exit 1; }',
    'for id in $ids; do',
    `  line=$(crictl inspectp -o go-template --template '{{.status.metadata.uid}} {{range .info.runtimeSpec.linux.namespaces}}{{if eq .type "network"}}{{.path}}{{end}}{{end}}' "$id" 2>/dev/null) || continue`,
    '  set -- $line',
    `  [ "$1" = '${podUid}' ] && [ -n "$2" ] || continue`,
    '  err=$(mktemp)',
    `  out=$(nsenter --net="$2" conntrack -L -f ${family} -p tcp --orig-src ${src} --orig-port-src ${sport} 2>"$err"); rc=$?`,
    `  printf '%s\\n' "$out" | sed -n 's/^./al-ct-out &/p'`,
    `  sed 's/^/al-ct-err /' "$err"; rm -f "$err"`,
    `  printf 'al-ct-exit %s\\n' "$rc"`,
    '  break',
    'done',
  ].join('\n');
}

/**
 * The listener port rawConntrackScript found for a SYN to `dport`: the reply source port of its
 * entry, or `dport` itself when conntrack ran, exited 0 and counted no entry (a real state: no
 * NAT). Anything else — no sandbox, a failing conntrack, output that does not add up — throws.
 */
export function parseRawPort(stdout: string, dport: number, what: string): number {
  const lines = stdout.split('\n');
  const exit = lines.map((l) => /^al-ct-exit (\d+)$/.exec(l)).find((m) => m !== null);
  const outLines = lines.filter((l) => l.startsWith('al-ct-out ')).map((l) => l.slice('al-ct-out '.length));
  const errLines = lines.filter((l) => l.startsWith('al-ct-err ')).map((l) => l.slice('al-ct-err '.length));
  if (!exit)
    throw new Error(
      `${what}: the destination pod's sandbox was not found on its node (no conntrack answer): ${stdout.trim().slice(0, 200) || '(no output)'}`,
    );
  if (exit[1] !== '0')
    throw new Error(
      `${what}: conntrack exited ${exit[1]} on the node: ${errLines.join(' ').trim() || '(no stderr)'} — the node needs \`conntrack\` (kindest/node ships it; Debian package conntrack)`,
    );
  const all = parseConntrackList(outLines.join('\n'), errLines.join('\n'), what);
  const ports = new Set(all.filter((e) => e.orig.dport === dport).map((e) => e.reply.sport));
  if (all.length > 0 && ports.size === 0)
    throw new Error(
      `${what}: conntrack lists this source only towards other ports: ${all.map((e) => e.orig.dport).join(', ')}`,
    );
  if (ports.size > 1)
    throw new Error(
      `${what}: conntrack has entries to different ports (${[...ports].join(', ')}); cannot tell which answered`,
    );
  return ports.size === 1 ? [...ports][0]! : dport;
}

/** Which socket took a raw SYN that got a SYN-ACK: the app (one of its ports) or a proxy port, in the destination pod. */
export function rawSynAckAcceptor(input: {
  readonly port: number;
  readonly dst: PodRef | undefined;
  readonly appPorts: readonly number[];
  readonly client: { readonly ip: string; readonly port: number };
}): { acceptedBy: Acceptor; acceptedIn?: PodRef; delivery?: Delivery } {
  const { port, dst, appPorts, client } = input;
  if (!dst) return { acceptedBy: 'other' };
  if (appPorts.includes(port))
    return {
      acceptedBy: 'app',
      acceptedIn: dst,
      delivery: { pod: dst, port, peer: ep(client.ip, client.port), viaProxy: false },
    };
  const proxy: Acceptor | undefined =
    port === 15001
      ? 'proxy-outbound'
      : port === 15006
        ? 'proxy-inbound'
        : port === 15008
          ? 'proxy-hbone'
          : port === 15053
            ? 'proxy-dns'
            : undefined;
  return { acceptedBy: proxy ?? 'other', acceptedIn: dst };
}
