/** A/AAAA rdata: an address literal as the 4 or 16 bytes DNS carries (RFC 1035 §3.4.1, RFC 3596). */
import { ipBytes, tryParseIpUnmapped } from '../../api/ip/address.js';

/**
 * The rdata bytes of an address, or undefined when `text` is not an IP literal. An IPv4-mapped
 * address is an A record's 4 bytes.
 */
export function addressBytes(text: string): { readonly family: 4 | 6; readonly bytes: Uint8Array } | undefined {
  const ip = tryParseIpUnmapped(text);
  return ip ? { family: ip.family, bytes: ipBytes(ip) } : undefined;
}
