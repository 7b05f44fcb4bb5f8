/**
 * Lab files: a YAML description of a small network — namespaces, devices, addresses, routes,
 * ip rules, ipsets, iptables-save text per family, an `nft -f` document, listening sockets and connection attempts —
 * that `ambient-lab trace` runs through the simulated kernel (and, with --kernel, through the
 * real one). The format is documented in docs/lab-file.md; fixtures/labs/ has examples.
 *
 * Parsing validates everything up front and reports the first problem with its line and path,
 * e.g. `lab.yaml:12:22 (namespaces[1].links[0].addresses[0]): invalid IP address "10.0.0.300"`.
 */
import { LineCounter, parseDocument, isNode, type Document } from 'yaml';
import { parseIp, type Family } from '../../impl/api/ip/address.js';
import { parsePrefix } from '../../impl/api/ip/prefix.js';
import type { Capability } from '../kernel/process.js';

interface LabLink {
  readonly name: string;
  readonly kind: 'bridge';
  readonly addresses: readonly string[];
  readonly up: boolean;
}

interface LabVethEnd {
  readonly netns: string;
  readonly name: string;
  readonly addresses: readonly string[];
  readonly master: string | undefined;
}

export interface LabRoute {
  readonly dst: string;
  readonly family: Family | undefined;
  readonly via: string | undefined;
  readonly dev: string | undefined;
  readonly table: string | number | undefined;
  readonly type: 'unicast' | 'local' | 'blackhole' | 'unreachable' | 'prohibit';
  readonly src: string | undefined;
  readonly metric: number | undefined;
}

export interface LabRule {
  readonly family: Family;
  /** Absent: the kernel picks it (`ip rule add` without a priority; PolicyRules.defaultPriority). */
  readonly priority: number | undefined;
  readonly fwmark: { readonly value: number; readonly mask: number } | undefined;
  readonly from: string | undefined;
  readonly to: string | undefined;
  readonly iif: string | undefined;
  readonly oif: string | undefined;
  readonly table: string | number | undefined;
  readonly action: 'lookup' | 'blackhole' | 'unreachable' | 'prohibit';
}

export interface LabNetns {
  readonly name: string;
  readonly forwarding: { readonly 4: boolean; readonly 6: boolean };
  readonly links: readonly LabLink[];
  readonly routes: readonly LabRoute[];
  readonly rules: readonly LabRule[];
  readonly ipsets: string | undefined;
  readonly iptables: string | undefined;
  readonly ip6tables: string | undefined;
  /** Line in the lab file where each restore text starts, so rule errors point into the file. */
  readonly iptablesLine: number;
  readonly ip6tablesLine: number;
  /** An `nft -f` document (any families), applied after iptables; absent: no nft tables. */
  readonly nftables?: string | undefined;
  readonly nftablesLine?: number;
}

interface LabOwner {
  readonly uid: number;
  readonly gid: number;
  /** Granted as listed on the real kernel; the model checks only NET_ADMIN, NET_RAW and NET_BIND_SERVICE. */
  readonly caps: readonly LinuxCapability[];
}

/** Errors a listener may be expected to meet (socket options, bind, listen). */
const LISTENER_ERRNOS = ['EADDRINUSE', 'EADDRNOTAVAIL', 'EACCES', 'EPERM', 'EINVAL'] as const;
/** What a listener came to: listening, or the errno its setup failed with. */
export type ListenerOutcome = 'listening' | (typeof LISTENER_ERRNOS)[number];

export interface LabSocket extends LabOwner {
  readonly name: string;
  readonly netns: string;
  readonly proto: 'tcp' | 'udp';
  readonly family: Family;
  readonly address: string;
  readonly port: number;
  readonly mark: number | undefined;
  readonly transparent: boolean;
  readonly reuseport: boolean;
  /**
   * `listening` (the default): a failure to set it up is an error in the lab. An errno: the setup
   * is expected to fail (a second bind of a port: EADDRINUSE); whatever happens, the lab goes on
   * and its results list the listener's outcome.
   */
  readonly expect: ListenerOutcome;
}

export interface LabAttempt extends LabOwner {
  readonly name: string;
  readonly netns: string;
  readonly proto: 'tcp' | 'udp';
  readonly address: string;
  readonly port: number;
  readonly mark: number | undefined;
  readonly source: string | undefined;
  readonly sourcePort: number | undefined;
  readonly transparent: boolean;
  readonly payload: string;
  /**
   * A failed setsockopt (SO_MARK, IP_TRANSPARENT without the capability): `fail` ends the attempt
   * with that error (the default); `continue` goes on without the option, as a program that
   * ignores the error would.
   */
  readonly onSockoptError: 'fail' | 'continue';
  /** AF_PACKET injection of a single segment/datagram out of this device (skips local netfilter). */
  readonly raw: { readonly dev: string; readonly nextHop: string | undefined } | undefined;
}

export interface Lab {
  readonly kernel: string;
  readonly namespaces: readonly LabNetns[];
  readonly veths: readonly { readonly a: LabVethEnd; readonly b: LabVethEnd }[];
  readonly sockets: readonly LabSocket[];
  readonly attempts: readonly LabAttempt[];
}

/** A problem in a lab file, as `FILE:LINE[:COLUMN] (PATH): DETAIL` (1-based line and column). */
export class LabError extends Error {
  constructor(
    readonly file: string,
    readonly line: number | undefined,
    readonly path: string,
    detail: string,
    readonly column?: number,
  ) {
    super(`${file}${line ? `:${line}${column ? `:${column}` : ''}` : ''}${path ? ` (${path})` : ''}: ${detail}`);
  }
}

type Path = readonly (string | number)[];

/** Every Linux capability (capability(7), numbers 0-40), without CAP_: what a lab may grant. */
export const LINUX_CAPABILITIES = [
  'CHOWN',
  'DAC_OVERRIDE',
  'DAC_READ_SEARCH',
  'FOWNER',
  'FSETID',
  'KILL',
  'SETGID',
  'SETUID',
  'SETPCAP',
  'LINUX_IMMUTABLE',
  'NET_BIND_SERVICE',
  'NET_BROADCAST',
  'NET_ADMIN',
  'NET_RAW',
  'IPC_LOCK',
  'IPC_OWNER',
  'SYS_MODULE',
  'SYS_RAWIO',
  'SYS_CHROOT',
  'SYS_PTRACE',
  'SYS_PACCT',
  'SYS_ADMIN',
  'SYS_BOOT',
  'SYS_NICE',
  'SYS_RESOURCE',
  'SYS_TIME',
  'SYS_TTY_CONFIG',
  'MKNOD',
  'LEASE',
  'AUDIT_WRITE',
  'AUDIT_CONTROL',
  'SETFCAP',
  'MAC_OVERRIDE',
  'MAC_ADMIN',
  'SYSLOG',
  'WAKE_ALARM',
  'BLOCK_SUSPEND',
  'AUDIT_READ',
  'PERFMON',
  'BPF',
  'CHECKPOINT_RESTORE',
] as const;
type LinuxCapability = (typeof LINUX_CAPABILITIES)[number];

/** The capabilities the kernel model checks; a lab's other ones reach the real kernel only (docs/lab-file.md). */
const MODELLED: readonly Capability[] = ['NET_ADMIN', 'NET_RAW', 'NET_BIND_SERVICE'];

/** The model's share of a lab owner's capabilities. */
export function modelledCaps(caps: readonly LinuxCapability[]): Capability[] {
  return caps.filter((c): c is Capability => (MODELLED as readonly string[]).includes(c));
}
const NAME = /^[A-Za-z0-9_.:-]{1,64}$/;
const DEV = /^[A-Za-z0-9_.@-]{1,15}$/;

export function parseLab(text: string, file = 'lab.yaml'): Lab {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    // With prettyErrors off the yaml package leaves linePos unset; the offset (pos) is always there.
    const at = e.linePos?.[0] ?? lc.linePos(e.pos[0]);
    throw new LabError(file, at.line, '', `YAML syntax error: ${e.message.split('\n')[0]}`, at.col);
  }
  return new LabParser(doc, lc, file).lab();
}

class LabParser {
  constructor(
    private readonly doc: Document,
    private readonly lc: LineCounter,
    private readonly file: string,
  ) {}

  private fail(path: Path, detail: string): never {
    const node = path.length === 0 ? this.doc.contents : this.doc.getIn(path, true);
    let at: { line: number; col: number } | undefined;
    if (isNode(node) && node.range) at = this.lc.linePos(node.range[0]);
    throw new LabError(this.file, at?.line, formatPath(path), detail, at?.col);
  }

  private lineOf(path: Path): number {
    const node = this.doc.getIn(path, true);
    if (isNode(node) && node.range) {
      // Block scalars (`|`) start their text on the next line.
      const l = this.lc.linePos(node.range[0]).line;
      const src = String(this.doc.toString()).split('\n')[l - 1] ?? '';
      return /[|>][+-]?\s*$/.test(src) ? l : l - 1;
    }
    return 0;
  }

  private obj(v: unknown, path: Path, keys: readonly string[]): Record<string, unknown> {
    if (typeof v !== 'object' || v === null || Array.isArray(v))
      this.fail(path, `expected a mapping with keys ${keys.join(', ')}`);
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o))
      if (!keys.includes(k)) this.fail([...path, k], `unknown key '${k}'; expected one of ${keys.join(', ')}`);
    return o;
  }

  private list(v: unknown, path: Path): unknown[] {
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) this.fail(path, 'expected a list');
    return v;
  }

  private str(v: unknown, path: Path, re?: RegExp, what = 'a string'): string {
    if (typeof v === 'number') v = String(v);
    if (typeof v !== 'string' || v.length === 0) this.fail(path, `expected ${what}`);
    if (re && !re.test(v)) this.fail(path, `invalid value ${JSON.stringify(v)}: expected ${what}`);
    return v;
  }

  private optStr(v: unknown, path: Path, re?: RegExp, what?: string): string | undefined {
    return v === undefined || v === null ? undefined : this.str(v, path, re, what);
  }

  private int(v: unknown, path: Path, min: number, max: number, what: string): number {
    let n: number | undefined;
    if (typeof v === 'number') n = v;
    else if (typeof v === 'string' && /^(0x[0-9a-fA-F]+|[0-9]+)$/.test(v)) n = Number(v);
    if (n === undefined || !Number.isInteger(n) || n < min || n > max)
      this.fail(path, `expected ${what} (integer ${min}..${max}, decimal or 0x hex)`);
    return n;
  }

  private bool(v: unknown, path: Path, dflt: boolean): boolean {
    if (v === undefined || v === null) return dflt;
    if (typeof v !== 'boolean') this.fail(path, 'expected true or false');
    return v;
  }

  private addr(v: unknown, path: Path): string {
    const s = this.str(v, path, undefined, 'an IP address');
    try {
      parseIp(s);
    } catch (e) {
      this.fail(path, (e as Error).message);
    }
    return s;
  }

  private cidr(v: unknown, path: Path): string {
    const s = this.str(v, path, undefined, 'an address with prefix length, e.g. 10.244.1.5/24');
    if (!s.includes('/')) this.fail(path, `address ${JSON.stringify(s)} needs a prefix length, e.g. ${s}/24`);
    try {
      parsePrefix(s);
    } catch (e) {
      this.fail(path, (e as Error).message);
    }
    return s;
  }

  private markSpec(v: unknown, path: Path): { value: number; mask: number } {
    if (typeof v === 'number') return { value: this.int(v, path, 0, 0xffffffff, 'a mark'), mask: 0xffffffff };
    const s = this.str(
      v,
      path,
      /^(0x[0-9a-fA-F]{1,8}|[0-9]+)(\/(0x[0-9a-fA-F]{1,8}|[0-9]+))?$/,
      'a mark VALUE[/MASK], e.g. 0x111/0xfff',
    );
    const [val, mask] = s.split('/');
    return { value: Number(val), mask: mask === undefined ? 0xffffffff : Number(mask) };
  }

  private family(v: unknown, path: Path, dflt: Family | undefined): Family | undefined {
    if (v === undefined || v === null) return dflt;
    if (v !== 4 && v !== 6) this.fail(path, 'expected family 4 or 6');
    return v;
  }

  private caps(v: unknown, path: Path): LinuxCapability[] {
    return this.list(v, path).map((c, i) => {
      const s = this.str(c, [...path, i], undefined, 'a capability');
      const norm = s.replace(/^CAP_/i, '').toUpperCase();
      if (!(LINUX_CAPABILITIES as readonly string[]).includes(norm))
        this.fail(
          [...path, i],
          `unknown capability ${JSON.stringify(s)}: expected a Linux capability name such as NET_ADMIN or CAP_SYS_ADMIN (capability(7))`,
        );
      return norm as LinuxCapability;
    });
  }

  private owner(o: Record<string, unknown>, path: Path): LabOwner {
    const uid = o['uid'] === undefined ? 0 : this.int(o['uid'], [...path, 'uid'], 0, 0xfffffffe, 'a uid');
    return {
      uid,
      gid: o['gid'] === undefined ? uid : this.int(o['gid'], [...path, 'gid'], 0, 0xfffffffe, 'a gid'),
      caps: this.caps(o['caps'], [...path, 'caps']),
    };
  }

  lab(): Lab {
    const root = this.obj(this.doc.toJS(), [], ['version', 'kernel', 'namespaces', 'veths', 'sockets', 'attempts']);
    if (root['version'] !== 1) this.fail(['version'], 'expected `version: 1`');
    const kernel =
      root['kernel'] === undefined
        ? '6.1'
        : this.str(root['kernel'], ['kernel'], /^\d+\.\d+(\.\d+)?$/, 'a kernel version like 6.1');
    const namespaces = this.list(root['namespaces'], ['namespaces']).map((n, i) => this.netns(n, ['namespaces', i]));
    const names = new Set<string>();
    namespaces.forEach((n, i) => {
      if (names.has(n.name)) this.fail(['namespaces', i, 'name'], `duplicate namespace ${n.name}`);
      names.add(n.name);
    });
    const nsRef = (v: unknown, path: Path): string => {
      const s = this.str(v, path, NAME, 'a namespace name');
      if (!names.has(s)) this.fail(path, `unknown namespace ${JSON.stringify(s)}; declared: ${[...names].join(', ')}`);
      return s;
    };
    const veths = this.list(root['veths'], ['veths']).map((v, i) => {
      const o = this.obj(v, ['veths', i], ['a', 'b']);
      const end = (e: unknown, p: Path): LabVethEnd => {
        const x = this.obj(e, p, ['netns', 'name', 'addresses', 'master']);
        return {
          netns: nsRef(x['netns'], [...p, 'netns']),
          name: this.str(x['name'], [...p, 'name'], DEV, 'a device name (1-15 characters)'),
          addresses: this.list(x['addresses'], [...p, 'addresses']).map((a, j) => this.cidr(a, [...p, 'addresses', j])),
          master: this.optStr(x['master'], [...p, 'master'], DEV, 'a bridge name'),
        };
      };
      return { a: end(o['a'], ['veths', i, 'a']), b: end(o['b'], ['veths', i, 'b']) };
    });
    const sockets = this.list(root['sockets'], ['sockets']).map((s, i) => {
      const p: Path = ['sockets', i];
      const o = this.obj(s, p, [
        'name',
        'netns',
        'proto',
        'family',
        'address',
        'port',
        'uid',
        'gid',
        'caps',
        'mark',
        'transparent',
        'reuseport',
        'expect',
      ]);
      const address = o['address'] === undefined ? undefined : this.addr(o['address'], [...p, 'address']);
      const family = this.family(o['family'], [...p, 'family'], address ? parseIp(address).family : 4)!;
      return {
        name: this.str(o['name'], [...p, 'name'], NAME, 'a socket name'),
        netns: nsRef(o['netns'], [...p, 'netns']),
        proto: this.proto(o['proto'], [...p, 'proto']),
        family,
        address: address ?? (family === 4 ? '0.0.0.0' : '::'),
        port: this.int(o['port'], [...p, 'port'], 1, 65535, 'a port'),
        ...this.owner(o, p),
        mark: o['mark'] === undefined ? undefined : this.int(o['mark'], [...p, 'mark'], 0, 0xffffffff, 'a mark'),
        transparent: this.bool(o['transparent'], [...p, 'transparent'], false),
        reuseport: this.bool(o['reuseport'], [...p, 'reuseport'], false),
        expect: (o['expect'] === undefined
          ? 'listening'
          : this.str(
              o['expect'],
              [...p, 'expect'],
              new RegExp(`^(listening|${LISTENER_ERRNOS.join('|')})$`),
              `listening or one of ${LISTENER_ERRNOS.join(', ')}`,
            )) as ListenerOutcome,
      };
    });
    const sockNames = new Set<string>();
    sockets.forEach((s, i) => {
      if (sockNames.has(s.name)) this.fail(['sockets', i, 'name'], `duplicate socket name ${s.name}`);
      sockNames.add(s.name);
    });
    const attempts = this.list(root['attempts'], ['attempts']).map((a, i) => {
      const p: Path = ['attempts', i];
      const o = this.obj(a, p, [
        'name',
        'netns',
        'proto',
        'address',
        'port',
        'uid',
        'gid',
        'caps',
        'mark',
        'source',
        'source_port',
        'transparent',
        'payload',
        'raw',
        'on_sockopt_error',
      ]);
      let raw: LabAttempt['raw'];
      if (o['raw'] !== undefined) {
        const r = this.obj(o['raw'], [...p, 'raw'], ['dev', 'next_hop']);
        raw = {
          dev: this.str(r['dev'], [...p, 'raw', 'dev'], DEV, 'a device name'),
          nextHop: r['next_hop'] === undefined ? undefined : this.addr(r['next_hop'], [...p, 'raw', 'next_hop']),
        };
      }
      const source = o['source'] === undefined ? undefined : this.addr(o['source'], [...p, 'source']);
      if (raw && !source) this.fail([...p, 'source'], 'a raw (AF_PACKET) attempt needs an explicit source address');
      return {
        name: this.str(o['name'], [...p, 'name'], NAME, 'an attempt name'),
        netns: nsRef(o['netns'], [...p, 'netns']),
        proto: this.proto(o['proto'], [...p, 'proto']),
        address: this.addr(o['address'], [...p, 'address']),
        port: this.int(o['port'], [...p, 'port'], 1, 65535, 'a port'),
        ...this.owner(o, p),
        mark: o['mark'] === undefined ? undefined : this.int(o['mark'], [...p, 'mark'], 0, 0xffffffff, 'a mark'),
        source,
        sourcePort:
          o['source_port'] === undefined
            ? undefined
            : this.int(o['source_port'], [...p, 'source_port'], 1, 65535, 'a port'),
        transparent: this.bool(o['transparent'], [...p, 'transparent'], false),
        payload: o['payload'] === undefined ? 'hello' : this.str(o['payload'], [...p, 'payload']),
        raw,
        onSockoptError: (o['on_sockopt_error'] === undefined
          ? 'fail'
          : this.str(o['on_sockopt_error'], [...p, 'on_sockopt_error'], /^(fail|continue)$/, 'fail or continue')) as
          'fail' | 'continue',
      };
    });
    return { kernel, namespaces, veths, sockets, attempts };
  }

  private proto(v: unknown, path: Path): 'tcp' | 'udp' {
    if (v === undefined) return 'tcp';
    if (v !== 'tcp' && v !== 'udp') this.fail(path, 'expected proto tcp or udp');
    return v;
  }

  private netns(v: unknown, path: Path): LabNetns {
    const o = this.obj(v, path, [
      'name',
      'forwarding',
      'links',
      'routes',
      'rules',
      'ipsets',
      'iptables',
      'ip6tables',
      'nftables',
    ]);
    const fwd =
      o['forwarding'] === undefined ? {} : this.obj(o['forwarding'], [...path, 'forwarding'], ['ipv4', 'ipv6']);
    const links = this.list(o['links'], [...path, 'links']).map((l, i) => {
      const p = [...path, 'links', i];
      const x = this.obj(l, p, ['name', 'kind', 'addresses', 'up']);
      if (x['kind'] !== 'bridge')
        this.fail(
          [...p, 'kind'],
          'only `kind: bridge` is declared here; veth pairs go under `veths`, lo always exists',
        );
      return {
        name: this.str(x['name'], [...p, 'name'], DEV, 'a device name (1-15 characters)'),
        kind: 'bridge' as const,
        addresses: this.list(x['addresses'], [...p, 'addresses']).map((a, j) => this.cidr(a, [...p, 'addresses', j])),
        up: this.bool(x['up'], [...p, 'up'], true),
      };
    });
    const routes = this.list(o['routes'], [...path, 'routes']).map((r, i) => {
      const p = [...path, 'routes', i];
      const x = this.obj(r, p, ['dst', 'family', 'via', 'dev', 'table', 'type', 'src', 'metric']);
      const dst = this.str(x['dst'], [...p, 'dst'], undefined, "'default' or an address/prefix");
      if (dst !== 'default') {
        try {
          parsePrefix(dst);
        } catch (e) {
          this.fail([...p, 'dst'], (e as Error).message);
        }
      }
      const via = x['via'] === undefined ? undefined : this.addr(x['via'], [...p, 'via']);
      const type =
        x['type'] === undefined
          ? 'unicast'
          : this.str(
              x['type'],
              [...p, 'type'],
              /^(unicast|local|blackhole|unreachable|prohibit)$/,
              'unicast, local, blackhole, unreachable or prohibit',
            );
      return {
        dst,
        family: this.family(
          x['family'],
          [...p, 'family'],
          dst === 'default' ? (via ? parseIp(via).family : undefined) : parsePrefix(dst).addr.family,
        ),
        via,
        dev: this.optStr(x['dev'], [...p, 'dev'], DEV, 'a device name'),
        table:
          x['table'] === undefined
            ? undefined
            : typeof x['table'] === 'number'
              ? x['table']
              : this.str(
                  x['table'],
                  [...p, 'table'],
                  /^(local|main|default|[0-9]+)$/,
                  'a table: local, main, default or a number',
                ),
        type: type as LabRoute['type'],
        src: x['src'] === undefined ? undefined : this.addr(x['src'], [...p, 'src']),
        metric:
          x['metric'] === undefined ? undefined : this.int(x['metric'], [...p, 'metric'], 0, 0xffffffff, 'a metric'),
      };
    });
    const rules = this.list(o['rules'], [...path, 'rules']).map((r, i) => {
      const p = [...path, 'rules', i];
      const x = this.obj(r, p, ['family', 'priority', 'fwmark', 'from', 'to', 'iif', 'oif', 'table', 'action']);
      const action =
        x['action'] === undefined
          ? 'lookup'
          : this.str(
              x['action'],
              [...p, 'action'],
              /^(lookup|blackhole|unreachable|prohibit)$/,
              'lookup, blackhole, unreachable or prohibit',
            );
      return {
        family: this.family(x['family'], [...p, 'family'], 4)!,
        priority:
          x['priority'] === undefined
            ? undefined
            : this.int(x['priority'], [...p, 'priority'], 0, 0xffffffff, 'a rule priority'),
        fwmark: x['fwmark'] === undefined ? undefined : this.markSpec(x['fwmark'], [...p, 'fwmark']),
        from: x['from'] === undefined ? undefined : this.str(x['from'], [...p, 'from']),
        to: x['to'] === undefined ? undefined : this.str(x['to'], [...p, 'to']),
        iif: this.optStr(x['iif'], [...p, 'iif'], DEV, 'a device name'),
        oif: this.optStr(x['oif'], [...p, 'oif'], DEV, 'a device name'),
        table:
          x['table'] === undefined
            ? undefined
            : typeof x['table'] === 'number'
              ? x['table']
              : this.str(x['table'], [...p, 'table'], /^(local|main|default|[0-9]+)$/, 'a table'),
        action: action as LabRule['action'],
      };
    });
    return {
      name: this.str(o['name'], [...path, 'name'], NAME, 'a namespace name (1-64 characters of [A-Za-z0-9_.:-])'),
      forwarding: {
        4: this.bool(fwd['ipv4'], [...path, 'forwarding', 'ipv4'], false),
        6: this.bool(fwd['ipv6'], [...path, 'forwarding', 'ipv6'], false),
      },
      links,
      routes,
      rules,
      ipsets: this.optStr(o['ipsets'], [...path, 'ipsets']),
      iptables: this.optStr(o['iptables'], [...path, 'iptables']),
      ip6tables: this.optStr(o['ip6tables'], [...path, 'ip6tables']),
      iptablesLine: this.lineOf([...path, 'iptables']),
      ip6tablesLine: this.lineOf([...path, 'ip6tables']),
      nftables: this.optStr(o['nftables'], [...path, 'nftables']),
      nftablesLine: this.lineOf([...path, 'nftables']),
    };
  }
}

function formatPath(path: Path): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}
