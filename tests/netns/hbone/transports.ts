/**
 * The HBONE transport implementations the conformance suite (conformance.spec.ts) runs, as
 * client/server pairs: every implementation of the HboneTransport port must pass the same
 * scenarios, and so must every cross pair (client of one, server of another), since a node
 * proxy of one build talks to nodes of another. To add an implementation, append its pairs
 * here (with itself and with each existing one, both ways); an implementation that cannot run
 * on this machine (addon not built) stays listed with `available: false` and the reason, so
 * its scenarios show as skipped rather than vanishing.
 */
import type { HboneTransport } from '../../../impl/host/hbone.js';
import { NativeHbone } from '../../../impl/linux/hbone-native.js';
import { TlsHbone } from '../../../impl/linux/hbone-tls.js';
import type { CertificateSource } from '../../../impl/linux/mesh-ca.js';

/**
 * Port violations found by the suite and not fixed yet. A pair that lists one runs the
 * scenarios it breaks as expected failures (test.fail), so a fix shows up as "passed
 * unexpectedly" and the entry must then go.
 */
export type KnownBug =
  /** The client's CONNECT stream, reset by the server (RST_STREAM), reads as a clean end instead of a failure. */
  | 'client-stream-reset-reads-as-eof'
  /** The server's CONNECT stream, reset by the client (RST_STREAM), reads as a clean end instead of a failure. */
  | 'server-stream-reset-reads-as-eof'
  /** serve() never settles when the client sends FIN during the TLS handshake (the connection is kept). */
  | 'serve-hangs-on-fin-in-handshake'
  /** serve() never settles when the client gives up on the handshake (bad server identity or root) and closes. */
  | 'serve-hangs-when-client-leaves-handshake';

export interface TransportPair {
  /** '<client> -> <server>', the describe title. */
  readonly name: string;
  client(certs: CertificateSource): HboneTransport;
  server(certs: CertificateSource): HboneTransport;
  readonly available: boolean;
  /** Why the pair is skipped, when it is not available. */
  readonly reason?: string;
  /** Known violations of the port by this pair, with the cause. */
  readonly knownBugs?: Readonly<Partial<Record<KnownBug, string>>>;
}

export const TRANSPORT_PAIRS: readonly TransportPair[] = [
  {
    name: 'tls -> tls',
    client: (c) => new TlsHbone({ certificates: c }),
    server: (c) => new TlsHbone({ certificates: c }),
    available: true,
  },
  ...nativePairs(),
];

/** The native tunnel (impl/linux/native/hbone-tunnel.cc) with itself and with node:tls, both ways. */
function nativePairs(): TransportPair[] {
  const native = NativeHbone.available();
  const tls = (c: CertificateSource): HboneTransport => new TlsHbone({ certificates: c });
  const nat = (c: CertificateSource): HboneTransport => new NativeHbone({ certificates: c });
  const availability = native.ok ? { available: true } : { available: false, reason: native.reason };
  return [
    { name: 'native -> native', client: nat, server: nat, ...availability },
    { name: 'native -> tls', client: nat, server: tls, ...availability },
    { name: 'tls -> native', client: tls, server: nat, ...availability },
  ];
}
