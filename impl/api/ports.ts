/** Well-known TCP/UDP ports of the node proxy inside each enrolled pod. */
import type { Brand } from './brand.js';

export type Port = Brand<number, 'Port'>;

export function port(n: number): Port {
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new Error(`invalid port ${n}: expected an integer in 1..65535`);
  return n as Port;
}

export const OUTBOUND_PORT = port(15001);
export const INBOUND_PLAINTEXT_PORT = port(15006);
export const INBOUND_HBONE_PORT = port(15008);
export const DNS_PORT = port(15053);
