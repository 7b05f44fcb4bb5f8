/**
 * DNS numbers the proxy uses (RFC 1035 §3.2, RFC 3596 for AAAA, RFC 6891 for OPT). Only the
 * values the proxy reads or writes are named; anything else is carried as a plain number.
 */

export const RR_TYPE = {
  A: 1,
  NS: 2,
  CNAME: 5,
  SOA: 6,
  PTR: 12,
  MX: 15,
  TXT: 16,
  AAAA: 28,
  SRV: 33,
  OPT: 41,
  ANY: 255,
} as const;

export const RR_CLASS_IN = 1;

/** Response codes (header RCODE, 4 bits). */
export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;
export type Rcode = (typeof RCODE)[keyof typeof RCODE];

export const OPCODE_QUERY = 0;

/** A DNS message never exceeds this: TCP frames carry a 16-bit length. */
export const MAX_MESSAGE_BYTES = 65_535;

/** TTL on answers made from the proxy's own cache (upstream ztunnel answers with 30 s). */
export const LOCAL_ANSWER_TTL_S = 30;

/** Name the type for logs: 'A', 'AAAA', or the number. */
export function rrTypeName(type: number): string {
  for (const [k, v] of Object.entries(RR_TYPE)) if (v === type) return k;
  return `TYPE${type}`;
}
