/** Connection-log records (impl/ztunnel/connection-log.ts) reduced to the World's ProxyLogEntry. */
import type { ConnectionLogRecord } from '../../../impl/ztunnel/connection-log.js';
import type { PodRef, ProxyLogEntry } from '../../world.js';

const EVENTS: Readonly<Record<ConnectionLogRecord['event'], ProxyLogEntry['event']>> = {
  accepted: 'accepted',
  forwarded: 'forwarded',
  denied: 'denied',
  // A live connection closed because a new policy denies it: a denial by the destination proxy.
  'closed-by-policy': 'denied',
  closed: 'closed',
  failed: 'error',
};

function podOf(text: string): PodRef | undefined {
  const i = text.indexOf('/');
  return i > 0 ? { namespace: text.slice(0, i), name: text.slice(i + 1) } : undefined;
}

export function toProxyLogEntry(node: string, r: ConnectionLogRecord): ProxyLogEntry {
  return {
    node,
    pod: podOf(r.pod),
    event: EVENTS[r.event],
    direction: r.direction,
    srcIdentity: r.srcIdentity,
    dstIdentity: r.dstIdentity,
    allowed: r.decision?.allow,
    reason: r.reason ?? r.decision?.reason ?? '',
  };
}
