/**
 * `--dns-upstream`: the resolvers the proxy's DNS listener forwards unknown names to, as a
 * comma-separated list of `IPv4[:PORT]` or `[IPv6][:PORT]` (port default 53). Parsed strictly: a
 * wrong entry stops the proxy at start-up instead of silently breaking the pods' DNS.
 */
import { isIP } from 'node:net';
import type { SocketAddress } from '../host/sockets.js';

export function parseDnsUpstream(entries: readonly string[]): SocketAddress[] {
  return entries.map((raw) => {
    const e = raw.trim();
    let host: string;
    let portText: string | undefined;
    const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(e);
    if (v6) { host = v6[1] ?? ''; portText = v6[2]; }
    else if (isIP(e) === 6) host = e; // bare IPv6 without a port
    else { const m = /^([^:]+)(?::(\d+))?$/.exec(e); host = m?.[1] ?? ''; portText = m?.[2]; }
    const family = isIP(host);
    // brackets belong to IPv6 only (RFC 3986 host syntax)
    if ((family !== 4 && family !== 6) || (v6 !== null && family !== 6)) {
      throw new Error(`--dns-upstream: ${JSON.stringify(raw)} is not an IP address with an optional port (e.g. 10.96.0.10:53 or [fd00:10:96::a]:53)`);
    }
    const port = portText === undefined ? 53 : Number(portText);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`--dns-upstream: port in ${JSON.stringify(raw)} must be 1..65535`);
    return { family, address: host, port };
  });
}
