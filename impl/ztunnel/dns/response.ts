/**
 * Responses the proxy writes itself: an answer from its own cache, or an error (FORMERR,
 * SERVFAIL, NOTIMP) for a query it cannot serve. The question is echoed, RD is copied, RA is set
 * (the proxy resolves recursively on the client's behalf by forwarding).
 */
import { LOCAL_ANSWER_TTL_S, RCODE, RR_CLASS_IN, type Rcode } from './constants.js';
import type { DnsMessage, DnsQuestion, DnsRecord } from './message.js';

function reply(
  id: number,
  rd: boolean,
  rcode: Rcode,
  questions: readonly DnsQuestion[],
  answers: readonly DnsRecord[],
  authoritative: boolean,
): DnsMessage {
  return {
    header: {
      id,
      response: true,
      opcode: 0,
      authoritative,
      truncated: false,
      recursionDesired: rd,
      recursionAvailable: true,
      rcode,
    },
    questions,
    answers,
    authority: [],
    additional: [],
  };
}

/** NOERROR with one record per address (none = the name exists but has no address of that type). */
export function localAnswer(query: DnsMessage, q: DnsQuestion, addresses: readonly Uint8Array[]): DnsMessage {
  const answers = addresses.map((data): DnsRecord => ({
    name: q.name,
    type: q.type,
    class: RR_CLASS_IN,
    ttl: LOCAL_ANSWER_TTL_S,
    data,
  }));
  return reply(query.header.id, query.header.recursionDesired, RCODE.NOERROR, [q], answers, true);
}

/** An error reply. `query` undefined: the frame did not decode, only its id is known. */
export function errorReply(id: number, rcode: Rcode, query?: DnsMessage): DnsMessage {
  return reply(id, query?.header.recursionDesired ?? false, rcode, query?.questions ?? [], [], false);
}
