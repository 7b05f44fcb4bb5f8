/**
 * Small topologies for the kernel-behaviour tests, built with the same calls a test on a real
 * kernel would make (ip netns/link/addr/route, iptables-restore, socket calls).
 *
 *   pair():   a (eth0 192.0.2.1/24, fd00::1/64) <-veth-> b (eth0 192.0.2.2/24, fd00::2/64)
 *   routed(): c (198.51.100.2) <-> r (198.51.100.1 | 203.0.113.1) <-> s (203.0.113.2),
 *             v6 fd00:c::2 / fd00:c::1 | fd00:5::1 / fd00:5::2; c and s route by default via r.
 */
import { SimKernel } from '../../../../sim/kernel/kernel.js';
import { credentials, type Credentials } from '../../../../sim/kernel/process.js';
import type { SimSocket, SockProto } from '../../../../sim/kernel/socket.js';
import type { Family } from '../../../../impl/api/ip/address.js';
import type { TraceEvent } from '../../../../sim/kernel/trace.js';

/** An unprivileged app (no capabilities). */
export const USER = credentials(1000, 1000);
export const OTHER_USER = credentials(1001, 1001);
export const ADMIN = credentials(0, 0, ['NET_ADMIN', 'NET_RAW']);
export const RAW_ONLY = credentials(1000, 1000, ['NET_RAW']);
export const ADMIN_ONLY = credentials(1000, 1000, ['NET_ADMIN']);

export function pair(opts: { kernelVersion?: string } = {}): SimKernel {
  const k = new SimKernel({ kernelVersion: opts.kernelVersion ?? '6.1' });
  for (const ns of ['a', 'b']) {
    k.addNetns(ns);
    k.setLink(ns, 'lo', true);
  }
  k.addVeth('a', 'eth0', 'b', 'eth0');
  k.addAddress('a', 'eth0', '192.0.2.1/24');
  k.addAddress('a', 'eth0', 'fd00::1/64');
  k.addAddress('b', 'eth0', '192.0.2.2/24');
  k.addAddress('b', 'eth0', 'fd00::2/64');
  k.setLink('a', 'eth0', true);
  k.setLink('b', 'eth0', true);
  return k;
}

export function routed(opts: { forwarding?: boolean } = {}): SimKernel {
  const k = new SimKernel();
  for (const ns of ['c', 'r', 's']) {
    k.addNetns(ns);
    k.setLink(ns, 'lo', true);
  }
  k.addVeth('c', 'eth0', 'r', 'rc');
  k.addVeth('s', 'eth0', 'r', 'rs');
  const addr = (ns: string, dev: string, ...cidrs: string[]): void => {
    for (const c of cidrs) k.addAddress(ns, dev, c);
    k.setLink(ns, dev, true);
  };
  addr('c', 'eth0', '198.51.100.2/24', 'fd00:c::2/64');
  addr('r', 'rc', '198.51.100.1/24', 'fd00:c::1/64');
  addr('r', 'rs', '203.0.113.1/24', 'fd00:5::1/64');
  addr('s', 'eth0', '203.0.113.2/24', 'fd00:5::2/64');
  k.addRoute('c', { dst: 'default', family: 4, via: '198.51.100.1' });
  k.addRoute('c', { dst: 'default', family: 6, via: 'fd00:c::1' });
  k.addRoute('s', { dst: 'default', family: 4, via: '203.0.113.1' });
  k.addRoute('s', { dst: 'default', family: 6, via: 'fd00:5::1' });
  if (opts.forwarding ?? true) {
    k.setForwarding('r', 4, true);
    k.setForwarding('r', 6, true);
  }
  return k;
}

export function listenTcp(
  k: SimKernel,
  ns: string,
  addr: string,
  port: number,
  opts: {
    owner?: Credentials;
    label?: string;
    family?: Family;
    transparent?: boolean;
    reusePort?: boolean;
    v6only?: boolean;
  } = {},
): SimSocket {
  const family = opts.family ?? (addr.includes(':') ? 6 : 4);
  const s = k.socket(ns, 'tcp', family, opts.owner ?? USER, opts.label ?? `listener ${addr}:${port}`);
  if (opts.transparent) k.setsockopt(s, 'IP_TRANSPARENT', true);
  if (opts.reusePort) k.setsockopt(s, 'SO_REUSEPORT', true);
  if (opts.v6only) k.setsockopt(s, 'IPV6_V6ONLY', true);
  k.bind(s, addr, port);
  k.listen(s);
  return s;
}

export function client(
  k: SimKernel,
  ns: string,
  opts: { owner?: Credentials; family?: Family; proto?: SockProto; mark?: number; label?: string } = {},
): SimSocket {
  const s = k.socket(ns, opts.proto ?? 'tcp', opts.family ?? 4, opts.owner ?? ADMIN, opts.label ?? 'client');
  if (opts.mark !== undefined) k.setsockopt(s, 'SO_MARK', opts.mark);
  return s;
}

/**
 * Make namespace `ns` track its connections of `families` without changing any verdict, as on
 * Linux, which tracks a namespace's connections only once a rule needs conntrack (an xt_conntrack
 * match here, jumping into an empty chain): a filter rule added with --noflush, so a later
 * restore of the filter table removes it.
 */
export function conntrackOn(k: SimKernel, ns: string, families: readonly Family[] = [4, 6]): void {
  for (const f of families)
    k.iptablesRestore(ns, f, table('filter', ':CT_ON - [0:0]', '-A OUTPUT -m conntrack --ctstate NEW -j CT_ON'), {
      noflush: true,
    });
}

/** iptables-restore text for one table: `rules('nat', '-A OUTPUT ...', ...)`. */
export function table(name: string, ...rules: string[]): string {
  return `*${name}\n${rules.join('\n')}${rules.length ? '\n' : ''}COMMIT\n`;
}

export function eventsOf<K extends TraceEvent['kind']>(
  trace: readonly TraceEvent[],
  kind: K,
): Extract<TraceEvent, { kind: K }>[] {
  return trace.filter((e): e is Extract<TraceEvent, { kind: K }> => e.kind === kind);
}

/** "ns table HOOK" for every table that ran, in order. */
export function tablesRun(trace: readonly TraceEvent[]): string[] {
  return eventsOf(trace, 'table').map((e) => `${e.ns} ${e.table} ${e.hook}`);
}

/** LOG prefixes in the order the packets hit them ("ns:prefix"). */
export function logs(trace: readonly TraceEvent[]): string[] {
  return eventsOf(trace, 'log').map((e) => `${e.ns}:${e.prefix.trim()}`);
}
