/**
 * Packet and connection marks (32-bit). A `Mark` is a value under a `mask`: a packet matches
 * when `(packetMark & mask) === value`. Upstream istio-cni constants are the defaults; they are
 * configuration, not hard-coded truth (upstream itself has shipped 0x3 as the proxy mark).
 */
import type { Brand } from './brand.js';

export type MarkValue = Brand<number, 'MarkValue'>;

export interface Mark {
  readonly value: MarkValue;
  readonly mask: MarkValue;
}

export function markValue(n: number): MarkValue {
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) {
    throw new Error(`invalid mark ${n}: expected an integer in 0..0xffffffff`);
  }
  return n as MarkValue;
}

export function mark(value: number, mask = 0xffffffff): Mark {
  const v = markValue(value);
  const m = markValue(mask);
  if ((v & ~m) >>> 0 !== 0) {
    throw new Error(`invalid mark 0x${value.toString(16)}/0x${mask.toString(16)}: the value has bits outside the mask`);
  }
  return { value: v, mask: m };
}

export function formatMark(m: Mark): string {
  return `0x${m.value.toString(16)}/0x${m.mask.toString(16)}`;
}

/** Mark the node proxy puts on every socket it opens in a pod namespace (upstream InpodMark). */
export const PROXY_MARK: Mark = mark(0x539, 0xfff);
/** Connmark/fwmark that steers replies of proxy-originated inbound connections back to lo. */
export const RETURN_MARK: Mark = mark(0x111, 0xfff);
/** Policy-routing table holding `local 0.0.0.0/0 dev lo` for the return path. */
export const RETURN_ROUTE_TABLE = 100;
