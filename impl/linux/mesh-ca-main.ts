/**
 * The mesh CA process (bin/ambient-lab-ca.js): impl/mesh-ca's CaService behind its HTTPS
 * endpoint (mesh-ca-http.ts), with the Linux adapters. Configuration: flags or AMBIENT_LAB_*
 * variables —
 *   --ca-cert PEM --ca-key PEM       (the mesh root, required: a Secret mounted into the CA's pod
 *                                     only; the key never leaves this process)
 *   --listen HOST:PORT               (default 0.0.0.0:15012, istiod's CA port)
 *   --dns-names a,b  --ips a,b       (names of the serving certificate the root signs at start;
 *                                     default ambient-lab-ca.ambient-lab-system.svc)
 *   --trust-domain D                 (default cluster.local)
 *   --audience A                     (callers' token audience; default istio-ca)
 *   --trusted-node-accounts ns/sa,…  (may ask for other identities; default ambient-lab-system/ambient-lab-proxy)
 *   --default-ttl-seconds N --max-ttl-seconds N (default 86400 and 7776000, as upstream)
 *   --kubeconfig PATH                (TokenReview and the pods; default $KUBECONFIG, else in-cluster)
 *   --log-level debug|info|warn|error
 * Deployed by deploy/base/ca.yaml; docs/mesh-identity.md.
 */
import * as fs from 'node:fs';
import { CA_DEFAULTS, CaService } from '../mesh-ca/ca-service.js';
import { handleCaRequest } from '../mesh-ca/http-api.js';
import { podFacts } from '../mesh-ca/node-authorizer.js';
import { SystemClock } from './clock.js';
import { ComponentFlags, ConfigError, runComponent } from './component-main.js';
import { ClientNodeKubeApi, kubeConfigSource, loadKubeConfig } from './kube-client-node.js';
import { pinoLogger } from './logger-pino.js';
import { MeshCa } from './mesh-ca.js';
import { serveCaHttps } from './mesh-ca-http.js';

runComponent('ambient-lab-ca', async () => {
  const f = new ComponentFlags(process.argv.slice(2), process.env, 'ambient-lab-ca');
  const caCert = f.str('ca-cert');
  const caKey = f.str('ca-key');
  const listen = f.str('listen', '0.0.0.0:15012');
  const dnsNames = f.list('dns-names', ['ambient-lab-ca.ambient-lab-system.svc']);
  const ips = f.list('ips', []);
  const trustDomain = f.str('trust-domain', 'cluster.local');
  const audience = f.str('audience', CA_DEFAULTS.audience);
  const trusted = f.list('trusted-node-accounts', ['ambient-lab-system/ambient-lab-proxy']);
  const defaultTtlSeconds = f.int('default-ttl-seconds', CA_DEFAULTS.defaultTtlSeconds, 60);
  const maxTtlSeconds = f.int('max-ttl-seconds', CA_DEFAULTS.maxTtlSeconds, 60);
  const kubeconfig = kubeConfigSource(f.optional('kubeconfig'), process.env, (p) => fs.existsSync(p));
  const level = f.oneOf('log-level', ['debug', 'info', 'warn', 'error'] as const, 'info');
  f.assertAllUsed();
  const m = /^(.+):(\d+)$/.exec(listen);
  if (!m) throw new ConfigError(`ambient-lab-ca: --listen ${JSON.stringify(listen)}: expected HOST:PORT`);
  for (const t of trusted)
    if (!/^[a-z0-9-]+\/[a-z0-9.-]+$/.test(t))
      throw new ConfigError(`ambient-lab-ca: --trusted-node-accounts: ${JSON.stringify(t)} is not namespace/name`);
  if (defaultTtlSeconds > maxTtlSeconds)
    throw new ConfigError(
      `ambient-lab-ca: --default-ttl-seconds ${defaultTtlSeconds} exceeds --max-ttl-seconds ${maxTtlSeconds}`,
    );

  const log = pinoLogger({ name: 'ambient-lab-ca', level });
  const clock = new SystemClock();
  const kube = new ClientNodeKubeApi(loadKubeConfig(kubeconfig));
  const root = await MeshCa.load(trustDomain, fs.readFileSync(caCert, 'utf8'), fs.readFileSync(caKey, 'utf8'));
  const pods = kube.informer('Pod');
  await pods.start();
  const ca = new CaService(
    { trustDomain, audience, trustedNodeAccounts: new Set(trusted), defaultTtlSeconds, maxTtlSeconds },
    {
      kube,
      pods: {
        get: (ns, name) => {
          const p = pods.get(name, ns);
          return p && podFacts(p);
        },
        onNode: (node) =>
          pods
            .list()
            .filter((p) => p.spec?.nodeName === node)
            .map(podFacts),
      },
      signer: root,
      clock,
      log,
    },
  );
  const serving = await root.servingCertificate(dnsNames, ips);
  const server = await serveCaHttps(
    { host: m[1]!, port: Number(m[2]), certPem: serving.certPem, keyPem: serving.keyPem },
    (req) => handleCaRequest(ca, req),
  );
  log.info('mesh CA serving', { listen: `${m[1]}:${server.port}`, trustDomain, audience, trusted: trusted.join(',') });
  return async () => {
    await server.close();
    pods.stop();
  };
});
