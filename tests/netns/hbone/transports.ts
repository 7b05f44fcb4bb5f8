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

// Both sides reset a stream with RST_STREAM(CANCEL). node:http2 ends the readable side of a
// stream reset by the peer ('end', then 'aborted'/'close'; 'error' only for codes other than
// NO_ERROR and CANCEL, and after 'end'), and duplexByteStream (impl/linux/byte-stream-duplex.ts)
// takes that 'end' as a clean end: the relay then half-closes instead of resetting.
const TLS_READS_RESET_AS_EOF = 'TlsHbone: a peer RST_STREAM(CANCEL) reads as a clean end (node:http2 emits end, no error; duplexByteStream trusts end)';
// The accepted net.Socket has allowHalfOpen (LinuxSockets, ByteStreamDuplex) and the server
// TLSSocket inherits it: a FIN before the handshake completes emits only 'end', which serve()
// does not listen to ('secure' | 'error' | 'close').
const TLS_SERVE_HANGS = 'TlsHbone.serve: a FIN during the handshake emits only end on the half-open server TLSSocket; serve() waits forever and keeps the connection';

export const TRANSPORT_PAIRS: readonly TransportPair[] = [
  {
    name: 'tls -> tls', client: (c) => new TlsHbone({ certificates: c }), server: (c) => new TlsHbone({ certificates: c }), available: true,
    knownBugs: {
      'client-stream-reset-reads-as-eof': TLS_READS_RESET_AS_EOF,
      'server-stream-reset-reads-as-eof': TLS_READS_RESET_AS_EOF,
      'serve-hangs-on-fin-in-handshake': TLS_SERVE_HANGS,
      // TlsHbone's client closes with a FIN after refusing the server: the same hang.
      'serve-hangs-when-client-leaves-handshake': TLS_SERVE_HANGS,
    },
  },
  ...nativePairs(),
];

/**
 * The native tunnel (impl/linux/native/hbone-tunnel.cc) with itself and with node:tls, both
 * ways. In a cross pair only the node:tls side's bugs show: the native client ends a refused
 * handshake with an alert or an RST (never the bare FIN that TlsHbone.serve misses), and the
 * native side reads an RST_STREAM as a failure.
 */
function nativePairs(): TransportPair[] {
  const native = NativeHbone.available();
  const tls = (c: CertificateSource): HboneTransport => new TlsHbone({ certificates: c });
  const nat = (c: CertificateSource): HboneTransport => new NativeHbone({ certificates: c });
  const availability = native.ok ? { available: true } : { available: false, reason: native.reason };
  return [
    { name: 'native -> native', client: nat, server: nat, ...availability },
    {
      name: 'native -> tls', client: nat, server: tls, ...availability,
      knownBugs: {
        'server-stream-reset-reads-as-eof': TLS_READS_RESET_AS_EOF,
        // With a native client the wire shows which side is at fault: when its app resets,
        // the node:http2 server ends the stream with END_STREAM, not RST_STREAM.
        'client-stream-reset-reads-as-eof': 'TlsHbone server: a reset of the relayed app connection ends the CONNECT stream cleanly (END_STREAM) instead of RST_STREAM',
        'serve-hangs-on-fin-in-handshake': TLS_SERVE_HANGS,
      },
    },
    { name: 'tls -> native', client: tls, server: nat, ...availability, knownBugs: { 'client-stream-reset-reads-as-eof': TLS_READS_RESET_AS_EOF } },
  ];
}
