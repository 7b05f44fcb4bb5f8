/**
 * What both Linux HBONE transports (hbone-tls.ts, hbone-native.ts) say the same way: failure
 * outcomes, the CONNECT authority text, and the fail-closed start of every tunnel (no
 * certificate for the local identity: reset the connection, fail 'no-certificate').
 */
import type { HboneConnectRequest, HboneFailure, HboneFailureKind } from '../host/hbone.js';
import type { TcpConnection } from '../host/sockets.js';
import { spiffeId, type PeerIdentity } from '../ztunnel/authz/authorizer.js';
import type { CertificateSource, IssuedCertificate } from './mesh-ca.js';

export function fail(kind: HboneFailureKind, message: string, status?: number): HboneFailure {
  return status === undefined ? { ok: false, kind, message } : { ok: false, kind, message, status };
}

/** `ip:port`, with brackets for IPv6 (the CONNECT `:authority`). */
export function authorityText(a: HboneConnectRequest['authority']): string {
  return a.family === 6 ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
}

/** The certificate for `local`, or the connection reset and the 'no-certificate' failure. */
export async function certificateOrFail(certs: CertificateSource, local: PeerIdentity, conn: TcpConnection): Promise<IssuedCertificate | HboneFailure> {
  const cert = await certs.certificateFor(local);
  if (cert) return cert;
  conn.reset();
  return fail('no-certificate', `no certificate for ${spiffeId(local)} (trust domain ${certs.trustDomain})`);
}
