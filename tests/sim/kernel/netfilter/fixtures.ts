/**
 * Test inputs: the Istio in-pod rules (default.golden, default_ipv6.golden) and host probe rules (hostprobe.golden) as
 * iptables-restore text (chain declarations and COMMIT added, as the agent's restore input has),
 * plus an EvalContext fake.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { parseIp, type Family, type IpAddress } from '../../../../impl/api/ip/address.js';
import type { L4Proto, Packet } from '../../../../sim/kernel/packet.js';
import type { AddrType, ConntrackRef, EvalContext, Hook, IpSetView } from '../../../../sim/kernel/netfilter/types.js';
import type { IpSets } from '../../../../sim/kernel/netfilter/ipset.js';

export const PROBE_V4 = '169.254.7.127';
const PROBE_V6 = 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff';
/** The upstream in-pod rulesets, from the one copy in fixtures/rules/ (iptables-save form). */
const RULES = path.resolve(import.meta.dirname, '..', '..', '..', '..', 'fixtures', 'rules');
export const ISTIO_INPOD_V4 = readFileSync(path.join(RULES, 'upstream-inpod-v4.rules'), 'utf8');
export const ISTIO_INPOD_V6 = readFileSync(path.join(RULES, 'upstream-inpod-v6.rules'), 'utf8');

export function hostProbe(family: Family): string {
  const set = family === 4 ? 'istio-inpod-probes-v4' : 'istio-inpod-probes-v6';
  const snat = family === 4 ? PROBE_V4 : PROBE_V6;
  return `*nat
:ISTIO_POSTRT - [0:0]
-I POSTROUTING 1 -j ISTIO_POSTRT
-A ISTIO_POSTRT -m owner --socket-exists -p tcp -m set --match-set ${set} dst -j SNAT --to-source ${snat}
COMMIT
`;
}

interface PacketInit {
  readonly proto?: L4Proto;
  readonly src?: string;
  readonly dst?: string;
  readonly sport?: number;
  readonly dport?: number;
  readonly mark?: number;
  readonly syn?: boolean;
  readonly ack?: boolean;
}

export function packet(p: PacketInit = {}): Packet {
  const src = parseIp(p.src ?? '10.244.1.5');
  return {
    id: 1,
    family: src.family,
    proto: p.proto ?? 'tcp',
    src,
    dst: parseIp(p.dst ?? (src.family === 4 ? '10.244.2.7' : 'fd00::2:7')),
    sport: p.sport ?? 40000,
    dport: p.dport ?? 80,
    flags: { syn: p.syn ?? true, ack: p.ack ?? false, fin: false, rst: false },
    mark: p.mark ?? 0,
  };
}

interface FakeCtx extends EvalContext {
  readonly logs: string[];
  notrack: boolean;
  zone: number | undefined;
}

export interface CtxInit {
  readonly hook: Hook;
  readonly packet?: Packet;
  readonly inIface?: string;
  readonly outIface?: string;
  readonly ct?: Partial<ConntrackRef> | 'none';
  readonly socket?: { uid: number; gid: number };
  /** Addresses classified LOCAL (others UNICAST); optionally per interface. */
  readonly local?: readonly string[];
  readonly localByIface?: Readonly<Record<string, readonly string[]>>;
  readonly ipsets?: IpSets;
}

export function ctx(init: CtxInit): FakeCtx {
  const pk = init.packet ?? packet();
  const ct: ConntrackRef | undefined =
    init.ct === 'none'
      ? undefined
      : {
          state: 'NEW',
          direction: 'original',
          mark: 0,
          zone: 0,
          origSrc: pk.src,
          origDst: pk.dst,
          origSport: pk.sport,
          origDport: pk.dport,
          snat: false,
          dnat: false,
          ...(init.ct ?? {}),
        };
  const local = (init.local ?? []).map((a) => parseIp(a).value);
  const c: FakeCtx = {
    hook: init.hook,
    family: pk.family,
    packet: pk,
    inIface: init.inIface,
    outIface: init.outIface,
    ct,
    socket: init.socket,
    logs: [],
    notrack: false,
    zone: undefined,
    addrType(addr: IpAddress, iface?: string): AddrType {
      const list = iface !== undefined ? (init.localByIface?.[iface] ?? []).map((a) => parseIp(a).value) : local;
      return list.includes(addr.value) ? 'LOCAL' : 'UNICAST';
    },
    ipset(name: string): IpSetView | undefined {
      return init.ipsets?.get(name);
    },
    setNotrack() {
      c.notrack = true;
    },
    setZone(z: number) {
      c.zone = z;
    },
    log(prefix: string) {
      c.logs.push(prefix);
    },
  };
  return c;
}

/** Wrap rules for one table with declarations of the given user chains. */
export function table(
  name: string,
  chains: readonly string[],
  rules: readonly string[],
  policies: Readonly<Record<string, string>> = {},
): string {
  return [
    `*${name}`,
    ...Object.entries(policies).map(([c, p]) => `:${c} ${p} [0:0]`),
    ...chains.map((c) => `:${c} - [0:0]`),
    ...rules,
    'COMMIT',
    '',
  ].join('\n');
}
