/**
 * What real TLS costs the sim: connections per second through the node proxy in the simulated
 * kernel (a -> c across nodes, HBONE, 1 exchange each), with the sim HBONE stand-in and with
 * real mutual TLS 1.3 + HTTP/2 (TlsHbone) over the same simulated sockets. Same run, same
 * topology; prints both rates and their ratio. This is the measurement behind using the
 * stand-in for large sim runs.
 *
 *   npm run bench:ztunnel-hbone-cost
 */
import { MeshCa } from '../impl/linux/mesh-ca.js';
import { TlsHbone } from '../impl/linux/hbone-tls.js';
import { buildMesh, echoServer, exchange, TRUST_DOMAIN } from '../sim/proxy-mesh/proxy-mesh.js';
import type { HboneTransport } from '../impl/host/hbone.js';

async function rate(hbone: HboneTransport | undefined, n: number): Promise<number> {
  const m = await buildMesh(hbone ? { hbone } : {});
  await echoServer(m.app('c'));
  const client = m.app('a');
  for (let i = 0; i < 5; i++) await exchange(client, '10.244.2.5', 8080); // warm up (certificate issue)
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const r = await exchange(client, '10.244.2.5', 8080, 'x');
    if (r.reply !== 'x') throw new Error(`exchange ${i} failed: ${r.reply}`);
    if (r.connect.ok) r.connect.value.close();
  }
  return n / (Number(process.hrtime.bigint() - t0) / 1e9);
}

const n = Number(process.env['N'] ?? 300);
const sim = await rate(undefined, n);
const tlsRate = await rate(new TlsHbone({ certificates: await MeshCa.create(TRUST_DOMAIN) }), n);
console.log(`sim HBONE stand-in : ${sim.toFixed(0)} proxied connections/s (${(1000 / sim).toFixed(3)} ms each)`);
console.log(
  `real TLS 1.3 + h2  : ${tlsRate.toFixed(0)} proxied connections/s (${(1000 / tlsRate).toFixed(3)} ms each)`,
);
console.log(`stand-in / real    : ${(sim / tlsRate).toFixed(1)}x`);
