/**
 * The node proxy process (bin/ambient-lab-proxy.js): Ztunnel (NodeProxy + ZdsClient) with the
 * Linux adapters, run in the node's host network namespace as root (it enters pod namespaces to
 * open their listeners). Configuration: flags or AMBIENT_LAB_* variables —
 *   --node NAME (required)          --kubeconfig PATH (pods and AuthorizationPolicies; default: $KUBECONFIG, else in-cluster)
 *   --zds-socket PATH               (default /var/run/ambient-lab/zds/zds.sock)
 *   --trust-domain D                (default cluster.local)
 *   --profile upstream|strict       (default upstream; the node agent's, from the same manifests:
 *                                    deploy/components/profile-strict sets both. strict: no
 *                                    plaintext to a destination pending enrollment)
 *   --connection-log PATH           (JSON lines, appended; default: stdout)
 *   --ipv6 BOOL                     (v6 listeners as well; default true, as upstream ztunnel; --ipv6=false: v4 only)
 *   --status-socket PATH              (the same endpoints on a Unix socket)
 *   --health-address HOST --health-port N (default 0.0.0.0:15020)
 *   --log-level debug|info|warn|error
 *   --dns-upstream IP[:PORT],...    (serve DNS on 15053 in every pod, forwarding unknown names to these
 *                                    resolvers, e.g. the cluster DNS service; `resolv.conf` = the nameservers
 *                                    of this process's /etc/resolv.conf, as upstream ztunnel; absent = no DNS
 *                                    listener, so pods with DNS capture get no DNS: fail closed)
 *   --dns-log PATH                  (DNS request records as JSON lines; default: stdout)
 *   --certificates ca|shared-root-test (default ca: workload certificates from the mesh CA, as
 *                                    upstream ztunnel's from istiod; this process holds no CA key.
 *                                    shared-root-test: a TEST MODE in which this process signs its
 *                                    own workload certificates with the cluster's root key, so root
 *                                    on any node can mint any identity; never deployed)
 *   --ca-address https://HOST:PORT   (ca: the mesh CA, upstream's CA_ADDRESS)
 *   --ca-root PEM                    (ca: the mesh root bundle; verifies the CA and HBONE peers)
 *   --token-file PATH                (ca: the projected service-account token, audience istio-ca;
 *                                    default /var/run/secrets/tokens/istio-token, as ztunnel's)
 *   --ca-cert PEM --ca-key PEM       (shared-root-test only: the shared root and its key)
 *   --hbone auto|native|tls         (the HBONE tunnel: native = OpenSSL + nghttp2 in the addon, relayed
 *                                    outside JavaScript; tls = node:tls + node:http2; auto (default) =
 *                                    native when its addon is built and loads, else tls, said in the log)
 * SIGTERM stops talking to the agent, closes the listeners and drains for up to 1 s.
 */
import * as fs from 'node:fs';
import type { PodUid } from '../api/ids.js';
import { PROFILES } from '../api/profile.js';
import { PolicyAuthorizer } from '../ztunnel/authz/engine.js';
import { PolicyStore } from '../ztunnel/authz/policy-store.js';
import { AuthorizationPolicyWatcher } from '../ztunnel/authz/policy-watcher.js';
import { JsonLinesSink, LineConnectionLog } from '../ztunnel/connection-log.js';
import { JsonLinesDnsLog, type DnsRequestLog } from '../ztunnel/dns/dns-log.js';
import { WorkloadIndex } from '../ztunnel/workloads.js';
import { WorkloadWatcher } from '../ztunnel/workloads-watch.js';
import { Ztunnel } from '../ztunnel/ztunnel.js';
import { SystemClock } from './clock.js';
import { ComponentFlags, ConfigError, runComponent } from './component-main.js';
import { parseDnsUpstream, resolvConfNameservers } from './dns-upstream.js';
import { HBONE_KINDS, hboneTransport, resolveHbone } from './hbone-choice.js';
import { serveHealth, type HealthSource } from './health-http.js';
import { ClientNodeKubeApi, kubeConfigSource, loadKubeConfig } from './kube-client-node.js';
import { pinoLogger } from './logger-pino.js';
import { MeshCa, type CertificateSource } from './mesh-ca.js';
import { CaClient, parseCaAddress } from './ca-client.js';
import { ManagedCertificates } from './managed-certificates.js';
import { CertificateManager } from '../ztunnel/cert-manager.js';
import { PromMetrics } from './metrics-prom.js';
import { LinuxSockets } from './sockets.js';
import { SystemRandom } from './random.js';
import { LinuxZdsTransport } from './zds-transport.js';

runComponent('ambient-lab-proxy', async () => {
  const f = new ComponentFlags(process.argv.slice(2), process.env, 'ambient-lab-proxy');
  const nodeName = f.str('node');
  const kubeconfig = kubeConfigSource(f.optional('kubeconfig'), process.env, (p) => fs.existsSync(p));
  const zdsAddress = f.str('zds-socket', '/var/run/ambient-lab/zds/zds.sock');
  const trustDomain = f.str('trust-domain', 'cluster.local');
  const profile = f.oneOf('profile', PROFILES, 'upstream');
  const logPath = f.optional('connection-log');
  const ipv6 = f.bool('ipv6', true);
  const healthHost = f.str('health-address', '0.0.0.0');
  const healthPort = f.int('health-port', 15020, 0, 65535);
  const statusSocket = f.optional('status-socket');
  const level = f.oneOf('log-level', ['debug', 'info', 'warn', 'error'] as const, 'info');
  const certMode = f.oneOf('certificates', ['ca', 'shared-root-test'] as const, 'ca');
  const caCert = f.optional('ca-cert');
  const caKey = f.optional('ca-key');
  const caAddress = f.optional('ca-address');
  const caRoot = f.optional('ca-root');
  const tokenFile = f.str('token-file', '/var/run/secrets/tokens/istio-token');
  const hboneKind = f.oneOf('hbone', HBONE_KINDS, 'auto');
  const dnsUpstream = parseDnsUpstream(
    f
      .list('dns-upstream', [])
      .flatMap((e) => (e === 'resolv.conf' ? resolvConfNameservers(fs.readFileSync('/etc/resolv.conf', 'utf8')) : [e])),
  );
  const dnsLogPath = f.optional('dns-log');
  f.assertAllUsed();
  if (certMode === 'ca') {
    if (caCert !== undefined || caKey !== undefined)
      throw new ConfigError(
        '--ca-cert/--ca-key hold the root key: they are for --certificates=shared-root-test only; the CA mode takes --ca-address and --ca-root',
      );
    if (caAddress === undefined || caRoot === undefined)
      throw new ConfigError(
        '--certificates=ca needs --ca-address (https://HOST:PORT of the mesh CA) and --ca-root (its root bundle)',
      );
    try {
      parseCaAddress(caAddress);
    } catch (e) {
      throw new ConfigError(`--ca-address: ${(e as Error).message}`);
    }
  } else if (caCert === undefined || caKey === undefined)
    throw new ConfigError('--certificates=shared-root-test needs --ca-cert and --ca-key (the shared root and its key)');

  const log = pinoLogger({ name: 'ambient-lab-proxy', level }).child({ node: nodeName });
  const clock = new SystemClock();
  const metrics = new PromMetrics();
  const kube = new ClientNodeKubeApi(loadKubeConfig(kubeconfig));
  const index = new WorkloadIndex({ trustDomain });
  const store = new PolicyStore({ log });
  const workloadWatcher = new WorkloadWatcher({ kube, clock, log, index });
  const policyWatcher = new AuthorizationPolicyWatcher({ kube, clock, log, store });
  const certFetched = metrics.counter(
    'ambient_lab_proxy_certificates_fetched_total',
    'Workload certificates from the CA',
  );
  const certFailed = metrics.counter(
    'ambient_lab_proxy_certificate_fetch_failures_total',
    'Failed workload certificate fetches (HBONE for the identity fails closed without a valid one)',
  );
  let manager: CertificateManager | undefined;
  let certificates: CertificateSource;
  if (certMode === 'ca') {
    let rootPem: string;
    try {
      rootPem = fs.readFileSync(caRoot!, 'utf8');
    } catch (e) {
      throw new Error(
        `cannot read the mesh root bundle --ca-root ${caRoot}: ${(e as Error).message} (the ConfigMap ambient-lab-mesh-root-cert, mounted; README, "Install")`,
        { cause: e },
      );
    }
    manager = new CertificateManager({
      fetcher: new CaClient({ address: caAddress!, rootPem, tokenFile }),
      clock,
      random: new SystemRandom(),
      log,
      metrics: { fetched: () => certFetched.inc(), failed: () => certFailed.inc() },
    });
    certificates = new ManagedCertificates(manager, trustDomain, rootPem);
    log.info('workload certificates from the mesh CA', { ca: caAddress, tokenFile });
  } else {
    certificates = await MeshCa.load(trustDomain, fs.readFileSync(caCert!, 'utf8'), fs.readFileSync(caKey!, 'utf8'));
    log.warn(
      'TEST MODE: this proxy signs workload certificates with the shared root key (--certificates=shared-root-test)',
    );
  }
  const hbone = resolveHbone(hboneKind);
  if (hbone.fallbackReason)
    log.warn('native HBONE tunnel unavailable; using node:tls + node:http2', { reason: hbone.fallbackReason });
  log.info('HBONE transport', { transport: hbone.use });
  const logFd = logPath ? fs.openSync(logPath, 'a', 0o600) : 1;
  const opened = metrics.counter('ambient_lab_proxy_connections_opened_total', 'Connections accepted', ['direction']);
  const closed = metrics.counter('ambient_lab_proxy_connections_closed_total', 'Connections ended', ['direction']);
  const denied = metrics.counter('ambient_lab_proxy_denied_total', 'Connections denied', ['direction', 'reason']);
  const served = metrics.gauge('ambient_lab_proxy_pods_served', 'Pods with open listeners');
  const dnsRequests = metrics.counter('ambient_lab_proxy_dns_requests_total', 'DNS requests on 15053', ['event']);
  const dnsLogFd = dnsLogPath ? fs.openSync(dnsLogPath, 'a', 0o600) : 1;
  const dnsLines = new JsonLinesDnsLog(clock, (line) => fs.writeSync(dnsLogFd, line));
  const dnsLog: DnsRequestLog = {
    record: (r) => {
      dnsRequests.inc({ event: r.event });
      dnsLines.record(r);
    },
  };
  const ztunnel = new Ztunnel({
    sockets: new LinuxSockets(),
    hbone: hboneTransport(hbone.use, certificates),
    ...(manager ? { identities: manager } : {}),
    authorizer: new PolicyAuthorizer({ store, log }),
    workloads: index,
    clock,
    log,
    trustDomain,
    profile,
    families: ipv6 ? [4, 6] : [4],
    connectionLog: new LineConnectionLog(clock, new JsonLinesSink((line) => fs.writeSync(logFd, line)), (err, r) => {
      log.error('connection log record could not be written', { error: err.message, pod: r.pod, event: r.event });
    }),
    metrics: {
      connectionOpened: (d) => opened.inc({ direction: d }),
      connectionClosed: (d) => closed.inc({ direction: d }),
      denied: (d, reason) => denied.inc({ direction: d, reason }),
      podsServed: (n) => served.set(n),
    },
    zdsTransport: new LinuxZdsTransport(),
    zdsAddress,
    random: new SystemRandom(),
    ...(dnsUpstream.length > 0 ? { dns: { upstream: dnsUpstream, log: dnsLog } } : {}),
  });
  const healthSource: HealthSource = {
    live: () => true,
    ready: () => ({
      ready: ztunnel.ready(),
      detail: `zds ${ztunnel.zds.connected() ? 'connected' : 'not connected'}, ${ztunnel.proxy.servedPods().length} pod(s) served`,
    }),
    metrics: async () => ({ contentType: metrics.contentType, text: await metrics.text() }),
    status: () => ({
      component: 'proxy',
      node: nodeName,
      pid: process.pid,
      ready: ztunnel.ready(),
      zdsConnected: ztunnel.zds.connected(),
      // identity (dev:inode of the netns received over ZDS) lets a harness outside this process tell
      // which sandbox is served without reading /proc/<pid>/fd (closed to others: the binary has file caps)
      pods: ztunnel.proxy.servedPods().map((uid: PodUid) => ({
        uid,
        netns: ztunnel.proxy.pod(uid)?.netns,
        identity: ztunnel.proxy.pod(uid)?.handle.identity,
      })),
      // resourceVersions in its caches (undefined before their first sync): a harness compares
      // them with the API to know this proxy has seen every pod and policy change
      caches: { pods: workloadWatcher.versions(), policies: policyWatcher.versions() },
      // identities this proxy holds certificates for, with each one's expiry (no keys)
      ...(manager ? { certificates: manager.held() } : {}),
    }),
  };
  const health = await serveHealth(healthHost, healthPort, healthSource);
  // The same endpoints on a Unix socket, for a harness outside the node's network namespace.
  const statusServer = statusSocket ? await serveHealth(statusSocket, 0, healthSource) : undefined;
  workloadWatcher.start();
  policyWatcher.start();
  ztunnel.start();
  log.info('proxy started', {
    zds: zdsAddress,
    profile,
    dns: dnsUpstream.length > 0 ? dnsUpstream.map((u) => `${u.address}:${u.port}`) : 'off',
    health: `${healthHost}:${health.port}`,
    connectionLog: logPath ?? 'stdout',
  });
  return async () => {
    await ztunnel.stop('graceful', 1000);
    workloadWatcher.stop();
    policyWatcher.stop();
    manager?.stop();
    await health.close();
    await statusServer?.close();
    if (logFd !== 1) fs.closeSync(logFd);
    if (dnsLogFd !== 1) fs.closeSync(dnsLogFd);
  };
});
