/**
 * What both Linux HBONE transports (hbone-tls.ts, hbone-native.ts) decide and say the same way:
 * failure outcomes, the CONNECT authority text, the fail-closed start of every tunnel (no
 * certificate for the local identity: reset the connection, fail 'no-certificate'), and the
 * SPIFFE checks after the handshake (as upstream ztunnel's TLS layer, src/tls/).
 */
import type { HboneConnectRequest, HboneFailure, HboneFailureKind, HboneOutcome } from '../host/hbone.js';
import type { TcpConnection } from '../host/sockets.js';
import { spiffeId, type PeerIdentity } from '../api/identity.js';
import type { CertificateSource, IssuedCertificate } from './mesh-ca.js';

export function fail(kind: HboneFailureKind, message: string, status?: number): HboneFailure {
  return status === undefined ? { ok: false, kind, message } : { ok: false, kind, message, status };
}

/** `ip:port`, with brackets for IPv6 (the CONNECT `:authority`). */
export function authorityText(a: HboneConnectRequest['authority']): string {
  return a.family === 6 ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
}

/** The certificate for `local`, or the connection reset and the 'no-certificate' failure. */
export async function certificateOrFail(
  certs: CertificateSource,
  local: PeerIdentity,
  conn: TcpConnection,
): Promise<IssuedCertificate | HboneFailure> {
  const cert = await certs.certificateFor(local);
  if (cert) return cert;
  conn.reset();
  return fail('no-certificate', `no certificate for ${spiffeId(local)} (trust domain ${certs.trustDomain})`);
}

/** Client side: the server's certificate must name one of the expected identities (any SPIFFE one when none is expected). */
export function checkServerIdentity(
  server: PeerIdentity | undefined,
  req: HboneConnectRequest,
  authority: string,
): HboneOutcome<PeerIdentity> {
  if (server && (req.expectedPeers.length === 0 || req.expectedPeers.some((e) => spiffeId(e) === spiffeId(server))))
    return { ok: true, value: server };
  return fail(
    'peer-identity',
    `HBONE to ${authority}: server is ${server ? spiffeId(server) : 'not a SPIFFE identity'}, expected ${req.expectedPeers.map(spiffeId).join(' or ')}`,
  );
}

/** Server side: the client's certificate must be a SPIFFE identity of this mesh's trust domain (authorization decides the rest). */
export function checkClientIdentity(peer: PeerIdentity | undefined, local: PeerIdentity): HboneOutcome<PeerIdentity> {
  if (peer && peer.trustDomain === local.trustDomain) return { ok: true, value: peer };
  return fail(
    'handshake',
    `client certificate ${peer ? `in trust domain ${peer.trustDomain}` : 'without a SPIFFE identity'}; this mesh is ${local.trustDomain}`,
  );
}
