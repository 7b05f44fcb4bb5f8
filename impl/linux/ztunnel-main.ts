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
 *   --status-socket PATH            (/status, /readyz, /config_dump, /logging and /metrics on a Unix
 *                                    socket, for a harness outside the node's network namespace)
 *   --listen-address HOST           (metrics and readiness; default 0.0.0.0, as upstream)
 *   --metrics-port N                (default 15020: /metrics, /stats/prometheus)
 *   --readiness-port N              (default 15021: /healthz/ready, and /healthz for liveness)
 *   --admin-address HOST --admin-port N (default 127.0.0.1:15000, loopback only: /config_dump,
 *                                    /logging, /status; docs/observability.md)
 *   --log-level debug|info|warn|error (the initial level; POST /logging?level=L on the admin port changes it)
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
import { IstioTcpMetrics, TeeConnectionLog } from '../ztunnel/istio-tcp-metrics.js';
import { JsonLinesDnsLog, type DnsRequestLog } from '../ztunnel/dns/dns-log.js';
import { WorkloadIndex } from '../ztunnel/workloads.js';
import { WorkloadWatcher } from '../ztunnel/workloads-watch.js';
import { Ztunnel } from '../ztunnel/ztunnel.js';
import { SystemClock } from './clock.js';
import { ComponentFlags, ConfigError, runComponent } from './component-main.js';
import { parseDnsUpstream, resolvConfNameservers } from './dns-upstream.js';
import { HBONE_KINDS, hboneTransport, resolveHbone } from './hbone-choice.js';
import {
  configDumpRoutes,
  loggingRoutes,
  metricsRoutes,
  readinessRoutes,
  readyzRoute,
  statusRoutes,
} from './endpoint-routes.js';
import { isLoopbackHost, serveEndpoints } from './http-endpoints.js';
import { ClientNodeKubeApi, kubeConfigSource, loadKubeConfig } from './kube-client-node.js';
import { LOG_LEVELS, LogLevelControl, pinoLogger } from './logger-pino.js';
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
  const listenAddress = f.str('listen-address', '0.0.0.0');
  const metricsPort = f.int('metrics-port', 15020, 0, 65535);
  const readinessPort = f.int('readiness-port', 15021, 0, 65535);
  const adminAddress = f.str('admin-address', '127.0.0.1');
  const adminPort = f.int('admin-port', 15000, 0, 65535);
  const statusSocket = f.optional('status-socket');
  const level = f.oneOf('log-level', LOG_LEVELS, 'info');
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
  if (!isLoopbackHost(adminAddress))
    throw new ConfigError(
      `--admin-address ${JSON.stringify(adminAddress)} is not a loopback address: the admin port shows workload identities and sets the log level, so it listens on 127.0.0.1 or ::1 only (as upstream's localhost:15000)`,
    );
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

  const logLevel = new LogLevelControl(level);
  const log = pinoLogger({ name: 'ambient-lab-proxy', control: logLevel }).child({ node: nodeName });
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
    // Istio's TCP metrics read the same records as the JSON-lines witness (istio-tcp-metrics.ts)
    connectionLog: new TeeConnectionLog([
      new LineConnectionLog(clock, new JsonLinesSink((line) => fs.writeSync(logFd, line)), (err, r) => {
        log.error('connection log record could not be written', { error: err.message, pod: r.pod, event: r.event });
      }),
      new IstioTcpMetrics(metrics, clock, index),
    ]),
    metrics: {
      denied: (d, reason) => denied.inc({ direction: d, reason }),
      podsServed: (n) => served.set(n),
    },
    zdsTransport: new LinuxZdsTransport(),
    zdsAddress,
    random: new SystemRandom(),
    ...(dnsUpstream.length > 0 ? { dns: { upstream: dnsUpstream, log: dnsLog } } : {}),
  });
  const ready = (): { ready: boolean; detail: string } => ({
    ready: ztunnel.ready(),
    detail: `zds ${ztunnel.zds.connected() ? 'connected' : 'not connected'}, ${ztunnel.proxy.servedPods().length} pod(s) served`,
  });
  const status = (): unknown => ({
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
  });
  const configDump = (): unknown => ({
    node: nodeName,
    profile,
    trustDomain,
    ipv6,
    hbone: hbone.use,
    certificates: {
      mode: certMode,
      ...(caAddress !== undefined ? { ca: caAddress } : {}),
      held: manager?.held() ?? [],
    },
    dns: dnsUpstream.map((u) => `${u.address}:${u.port}`),
    logLevel: logLevel.level,
    servedPods: ztunnel.proxy.servedPods(),
    workloads: index.all().map((w) => ({
      uid: w.uid,
      namespace: w.namespace,
      name: w.name,
      workload: w.workloadName,
      serviceAccount: w.serviceAccount,
      identity: w.spiffe,
      node: w.node,
      ips: w.ips,
      hostNetwork: w.hostNetwork,
      enrolled: w.enrolled,
      pending: w.pending,
    })),
    policies: Object.fromEntries(store.allTranslations()),
  });
  const adminRoutes = [...configDumpRoutes(configDump), ...loggingRoutes(logLevel), ...statusRoutes(status)];
  const servers = [
    await serveEndpoints('proxy metrics', { host: listenAddress, port: metricsPort }, metricsRoutes(metrics)),
    await serveEndpoints(
      'proxy readiness',
      { host: listenAddress, port: readinessPort },
      readinessRoutes('/healthz/ready', ready),
    ),
    await serveEndpoints('proxy admin', { host: adminAddress, port: adminPort }, adminRoutes),
    // everything again on a Unix socket, for a harness outside the node's network namespace
    ...(statusSocket
      ? [
          await serveEndpoints('proxy status socket', { socket: statusSocket }, [
            ...adminRoutes,
            readyzRoute(ready),
            ...metricsRoutes(metrics),
          ]),
        ]
      : []),
  ];
  workloadWatcher.start();
  policyWatcher.start();
  ztunnel.start();
  log.info('proxy started', {
    zds: zdsAddress,
    profile,
    dns: dnsUpstream.length > 0 ? dnsUpstream.map((u) => `${u.address}:${u.port}`) : 'off',
    metrics: `${listenAddress}:${servers[0]!.port}`,
    readiness: `${listenAddress}:${servers[1]!.port}`,
    admin: `${adminAddress}:${servers[2]!.port}`,
    connectionLog: logPath ?? 'stdout',
  });
  return async () => {
    await ztunnel.stop('graceful', 1000);
    workloadWatcher.stop();
    policyWatcher.stop();
    manager?.stop();
    for (const server of servers) await server.close();
    if (logFd !== 1) fs.closeSync(logFd);
    if (dnsLogFd !== 1) fs.closeSync(dnsLogFd);
  };
});
