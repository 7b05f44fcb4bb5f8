/**
 * Which Linux HBONE transport a proxy runs: `native` (the tunnel in hbone-tunnel.cc), `tls`
 * (node:tls + node:http2), or `auto` — native when its addon is built and loads, else tls. One
 * rule for the proxy main (`--hbone`), the bench and the real-kernel test mesh (`HBONE=`).
 */
import type { HboneTransport } from '../host/hbone.js';
import { NativeHbone } from './hbone-native.js';
import { TlsHbone } from './hbone-tls.js';
import type { CertificateSource } from './mesh-ca.js';

export const HBONE_KINDS = ['auto', 'native', 'tls'] as const;
type HboneKind = (typeof HBONE_KINDS)[number];

/** The transport `kind` resolves to here, and why native was passed over for auto. Throws for native when it cannot run. */
export function resolveHbone(kind: HboneKind): { readonly use: 'native' | 'tls'; readonly fallbackReason?: string } {
  if (kind === 'tls') return { use: 'tls' };
  const native = NativeHbone.available();
  if (native.ok) return { use: 'native' };
  if (kind === 'native') throw new Error(`HBONE transport native asked for, but: ${native.reason}`);
  return { use: 'tls', fallbackReason: native.reason };
}

export function hboneTransport(use: 'native' | 'tls', certificates: CertificateSource): HboneTransport {
  return use === 'native' ? new NativeHbone({ certificates }) : new TlsHbone({ certificates });
}

/** An HBONE kind from text (an environment variable); undefined means auto. */
export function parseHboneKind(text: string | undefined, where: string): HboneKind {
  if (text === undefined || text === '') return 'auto';
  if ((HBONE_KINDS as readonly string[]).includes(text)) return text as HboneKind;
  throw new Error(`${where}: HBONE transport must be one of ${HBONE_KINDS.join(', ')} (got ${JSON.stringify(text)})`);
}
