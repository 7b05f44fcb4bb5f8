/**
 * The compromised node's attempt (World.forgedHbone in the real worlds), run by the world as
 * root in the node's network namespace:
 *
 *   node dist/e2e/netns/forged-hbone-program.js ca|self-signed CA_ADDRESS ROOT_FILE TOKEN_FILE IDENTITY DST_IP DST_PORT TAG
 *
 * 1. A certificate for IDENTITY: from the mesh CA with the token in TOKEN_FILE (this
 *    repository's CaClient, the proxy's own fetcher: a new key, a CSR, the answer checked), or —
 *    `self-signed` — from a root the program makes itself.
 * 2. Unless the CA refused: TCP to DST_IP:15008 (the destination pod's node proxy), HBONE with
 *    that certificate (the proxy's TLS transport), CONNECT to DST_IP:DST_PORT, send TAG and a
 *    newline, read the app's answer to the end.
 * It prints one JSON line: {certificate: issued|refused|self-signed, detail, hbone?, sourcePort?,
 * reply?}, or {error} when it could not tell (the CA unreachable, an answer that is neither a
 * certificate nor a refusal): the world turns that into a harness error, never a verdict.
 */
import * as fs from 'node:fs';
import { parseSpiffeId } from '../../impl/api/identity.js';
import { CaClient } from '../../impl/linux/ca-client.js';
import { MeshCa, type IssuedCertificate } from '../../impl/linux/mesh-ca.js';
import { TlsHbone } from '../../impl/linux/hbone-tls.js';
import { LinuxSockets } from '../../impl/linux/sockets.js';

const HBONE_PORT = 15008;

interface Outcome {
  readonly certificate?: 'issued' | 'refused' | 'self-signed';
  readonly detail?: string;
  readonly hbone?: string;
  readonly sourcePort?: number;
  readonly reply?: string;
  readonly error?: string;
}

async function attempt(argv: readonly string[]): Promise<Outcome> {
  const [mode, caAddress, rootFile, tokenFile, identity, dstIp, dstPortText, tag] = argv;
  if (argv.length !== 8 || (mode !== 'ca' && mode !== 'self-signed'))
    return {
      error: `usage: forged-hbone-program ca|self-signed CA_ADDRESS ROOT_FILE TOKEN_FILE IDENTITY DST_IP DST_PORT TAG (got ${argv.length} arguments)`,
    };
  const local = parseSpiffeId(identity!);
  if (!local) return { error: `${JSON.stringify(identity)} is not a SPIFFE ID` };
  const rootPem = fs.readFileSync(rootFile!, 'utf8');
  let issued: IssuedCertificate | undefined;
  let certificate: Outcome['certificate'];
  let detail: string;
  if (mode === 'ca') {
    try {
      const c = await new CaClient({ address: caAddress!, rootPem, tokenFile: tokenFile! }).fetch(identity!);
      issued = { identity: local, certPem: [c.certPem, ...c.chainPem].join(''), keyPem: c.keyPem };
      certificate = 'issued';
      detail = `the mesh CA issued ${identity}`;
    } catch (e) {
      const message = (e as Error).message;
      // Only the CA's refusal is an answer; anything else (unreachable, a malformed answer) is not.
      if (/ refused \S+: 40[13] /.test(message)) return { certificate: 'refused', detail: message };
      return { error: `asking the mesh CA at ${caAddress}: ${message}` };
    }
  } else {
    const own = await MeshCa.create(local.trustDomain);
    issued = await own.certificateFor(local);
    if (!issued) return { error: `a root of its own would not issue ${identity}` };
    certificate = 'self-signed';
    detail = 'issued by a root of the attacker’s own making';
  }
  const sockets = new LinuxSockets();
  const conn = await sockets.connectTcp({
    family: 4,
    dst: { family: 4, address: dstIp!, port: HBONE_PORT },
    timeoutMs: 3000,
  });
  if (!conn.ok) return { certificate, detail, hbone: `TCP to ${dstIp}:${HBONE_PORT}: ${JSON.stringify(conn)}` };
  const sourcePort = conn.value.localAddress.port;
  const cert = issued;
  const hbone = new TlsHbone({
    certificates: { trustDomain: local.trustDomain, rootPem, certificateFor: () => Promise.resolve(cert) },
  });
  const tunnel = await hbone.connect(conn.value, {
    local,
    expectedPeers: [],
    authority: { family: 4, address: dstIp!, port: Number(dstPortText) },
  });
  if (!tunnel.ok) return { certificate, detail, hbone: `refused: ${tunnel.kind}: ${tunnel.message}`, sourcePort };
  await tunnel.value.write(Buffer.from(`${tag}\n`));
  let reply = '';
  for (;;) {
    const r = await tunnel.value.read();
    if (r.done) break;
    reply += Buffer.from(r.bytes).toString('utf8');
    if (reply.length > 4096) break;
  }
  tunnel.value.close();
  return { certificate, detail, hbone: 'accepted', sourcePort, reply };
}

attempt(process.argv.slice(2)).then(
  (o) => {
    process.stdout.write(`${JSON.stringify(o)}\n`);
    process.exit(0);
  },
  (e: unknown) => {
    process.stdout.write(`${JSON.stringify({ error: e instanceof Error ? e.message : String(e) })}\n`);
    process.exit(0);
  },
);
