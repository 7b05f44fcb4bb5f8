/**
 * `--dns-upstream`: the resolvers the proxy's DNS listener forwards unknown names to, as a
 * comma-separated list of `IPv4[:PORT]` or `[IPv6][:PORT]` (port default 53). Parsed strictly: a
 * wrong entry stops the proxy at start-up instead of silently breaking the pods' DNS.
 */
import { isIP } from 'node:net';
import type { SocketAddress } from '../host/sockets.js';
import { ConfigError } from './component-main.js';

export function parseDnsUpstream(entries: readonly string[]): SocketAddress[] {
  return entries.map((raw) => {
    const e = raw.trim();
    let host: string;
    let portText: string | undefined;
    const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(e);
    if (v6) {
      host = v6[1] ?? '';
      portText = v6[2];
    } else if (isIP(e) === 6)
      host = e; // bare IPv6 without a port
    else {
      const m = /^([^:]+)(?::(\d+))?$/.exec(e);
      host = m?.[1] ?? '';
      portText = m?.[2];
    }
    const family = isIP(host);
    // brackets belong to IPv6 only (RFC 3986 host syntax)
    if ((family !== 4 && family !== 6) || (v6 !== null && family !== 6)) {
      throw new ConfigError(
        `--dns-upstream: ${JSON.stringify(raw)} is not an IP address with an optional port (e.g. 10.96.0.10:53 or [fd00:10:96::a]:53)`,
      );
    }
    const port = portText === undefined ? 53 : Number(portText);
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new ConfigError(`--dns-upstream: port in ${JSON.stringify(raw)} must be 1..65535`);
    return { family, address: host, port };
  });
}

/**
 * The nameservers of a resolv.conf text, in order (`nameserver ADDR` lines; comments and other
 * options ignored): what `--dns-upstream resolv.conf` forwards to, as upstream ztunnel forwards
 * to the resolvers of its own resolv.conf. None is an error (DNS capture would answer nothing).
 */
export function resolvConfNameservers(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    if (m) out.push(isIP(m[1]!) === 6 ? `[${m[1]}]` : m[1]!);
  }
  if (out.length === 0) throw new Error('--dns-upstream resolv.conf: /etc/resolv.conf names no nameserver');
  return out;
}
