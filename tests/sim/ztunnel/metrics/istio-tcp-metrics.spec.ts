/**
 * Istio's standard TCP metrics from the proxy's connection records (impl/ztunnel/istio-tcp-metrics.ts):
 * the label set ztunnel uses, reporter per direction, principals only as mTLS proved them,
 * request/response bytes the right way round, response flags for denials and failures, and the
 * duration from forwarded to closed.
 */
import { test, expect } from '@playwright/test';
import { IstioTcpMetrics, ISTIO_TCP_LABELS } from '../../../../impl/ztunnel/istio-tcp-metrics.js';
import type { ProxyConnectionRecord, ProxyWorkload, WorkloadLookup } from '../../../../impl/ztunnel/proxy-deps.js';
import { MemoryMetrics } from '../../../../sim/metrics/memory-metrics.js';
import { VirtualClock } from '../../../../sim/time/virtual-clock.js';

const wl = (
  name: string,
  ns: string,
  ip: string,
  labels: Record<string, string> = {},
  workloadName?: string,
): ProxyWorkload => ({
  uid: `uid-${name}`,
  name,
  ...(workloadName ? { workloadName } : {}),
  namespace: ns,
  serviceAccount: `sa-${name}`,
  labels,
  ips: [ip],
  enrolled: true,
  identity: { trustDomain: 'cluster.local', namespace: ns, serviceAccount: `sa-${name}` },
});
const client = wl('client-7d9f-abcde', 'shop', '10.244.1.5', { app: 'client', version: 'v2' }, 'client');
const server = wl('server', 'shop', '10.244.2.7', { 'app.kubernetes.io/name': 'server-app' });
const lookup: WorkloadLookup = {
  byIp: (ip) => [client, server].find((w) => w.ips.includes(ip)),
  byUid: () => undefined,
};
const CLIENT_ID = 'spiffe://cluster.local/ns/shop/sa/sa-client-7d9f-abcde';
const SERVER_ID = 'spiffe://cluster.local/ns/shop/sa/sa-server';

function setup() {
  const metrics = new MemoryMetrics();
  const clock = new VirtualClock();
  const m = new IstioTcpMetrics(metrics, clock, lookup);
  return { metrics, clock, m };
}

const outbound = (
  event: ProxyConnectionRecord['event'],
  extra: Partial<ProxyConnectionRecord> = {},
): ProxyConnectionRecord => ({
  event,
  direction: 'outbound',
  pod: 'shop/client-7d9f-abcde',
  downstream: { src: '10.244.1.5:40000', dst: '10.244.2.7:8080' },
  target: '10.244.2.7:8080',
  ...extra,
});
const inbound = (
  event: ProxyConnectionRecord['event'],
  extra: Partial<ProxyConnectionRecord> = {},
): ProxyConnectionRecord => ({
  event,
  direction: 'inbound-hbone',
  pod: 'shop/server',
  downstream: { src: '10.244.1.5:51000', dst: '10.244.2.7:15008' },
  target: '10.244.2.7:8080',
  srcIdentity: CLIENT_ID,
  ...extra,
});

/** The one series of a counter (fails when there are several or none). */
function onlySeries(metrics: MemoryMetrics, name: string): { labels: Record<string, string>; value: number } {
  const series = [...(metrics.values.get(name) ?? new Map<string, number>()).entries()];
  expect(series, name).toHaveLength(1);
  const [k, value] = series[0]!;
  return { labels: Object.fromEntries(JSON.parse(k) as [string, string][]), value };
}

test('an outbound HBONE connection: reporter source, both workloads named as Istio names them, the source principal as mTLS presents it, bytes the right way round', () => {
  const { metrics, clock, m } = setup();
  m.record(outbound('accepted'));
  m.record(outbound('forwarded', { mode: 'hbone', srcIdentity: CLIENT_ID, dstIdentity: SERVER_ID }));
  clock.advance(250);
  m.record(outbound('closed', { mode: 'hbone', srcIdentity: CLIENT_ID, bytesSent: 11, bytesReceived: 4096 }));
  const opened = onlySeries(metrics, 'istio_tcp_connections_opened_total');
  expect(opened.value).toBe(1);
  expect(Object.keys(opened.labels).sort()).toEqual([...ISTIO_TCP_LABELS].sort());
  expect(opened.labels).toMatchObject({
    reporter: 'source',
    source_workload: 'client',
    source_workload_namespace: 'shop',
    source_canonical_service: 'client',
    source_app: 'client',
    source_version: 'v2',
    source_canonical_revision: 'v2',
    source_principal: CLIENT_ID,
    source_cluster: 'Kubernetes',
    destination_workload: 'server',
    destination_canonical_service: 'server-app',
    destination_version: 'latest',
    destination_principal: SERVER_ID,
    destination_service: 'unknown',
    request_protocol: 'tcp',
    response_flags: '-',
    connection_security_policy: 'mutual_tls',
  });
  expect(onlySeries(metrics, 'istio_tcp_connections_closed_total')).toEqual({ labels: opened.labels, value: 1 });
  // request bytes (client → server) are "received", response bytes "sent", as Istio defines them
  expect(onlySeries(metrics, 'istio_tcp_received_bytes_total').value).toBe(11);
  expect(onlySeries(metrics, 'istio_tcp_sent_bytes_total').value).toBe(4096);
  expect(metrics.values.get('istio_tcp_connections_failed_total')?.size ?? 0).toBe(0);
  expect(metrics.observations('ambient_lab_proxy_connection_duration_seconds', { direction: 'outbound' })).toEqual([
    0.25,
  ]);
});

test('an inbound HBONE connection: reporter destination, the source principal from the peer certificate; inbound byte counts map to the same request/response sides', () => {
  const { metrics, m } = setup();
  m.record(inbound('forwarded', { mode: 'hbone', dstIdentity: SERVER_ID }));
  // inbound: bytesSent went to the client (response), bytesReceived came from it (request)
  m.record(inbound('closed', { mode: 'hbone', bytesSent: 4096, bytesReceived: 11 }));
  const opened = onlySeries(metrics, 'istio_tcp_connections_opened_total');
  expect(opened.labels).toMatchObject({
    reporter: 'destination',
    source_workload: 'client',
    source_principal: CLIENT_ID,
    destination_workload: 'server',
    destination_principal: SERVER_ID,
    connection_security_policy: 'mutual_tls',
  });
  expect(onlySeries(metrics, 'istio_tcp_received_bytes_total').value).toBe(11);
  expect(onlySeries(metrics, 'istio_tcp_sent_bytes_total').value).toBe(4096);
});

test('plaintext: no principal for the source (nothing proved it) and security policy unknown; an unknown peer is "unknown" throughout', () => {
  const { metrics, m } = setup();
  const r = {
    direction: 'inbound-plaintext' as const,
    downstream: { src: '192.0.2.50:5000', dst: '10.244.2.7:8080' },
    srcIdentity: undefined,
  };
  m.record(inbound('forwarded', { ...r, mode: 'plaintext' }));
  const opened = onlySeries(metrics, 'istio_tcp_connections_opened_total').labels;
  expect(opened).toMatchObject({
    reporter: 'destination',
    source_workload: 'unknown',
    source_workload_namespace: 'unknown',
    source_principal: 'unknown',
    source_cluster: 'unknown',
    destination_workload: 'server',
    connection_security_policy: 'unknown',
  });
});

test('response flags: a policy denial opens and closes as DENY, a failed connect as CONNECT, a failed HBONE handshake as TLS_FAILURE; a live connection closed by policy ends as DENY; early refusals are no connection', () => {
  const { metrics, m } = setup();
  m.record(inbound('denied', { reason: 'policy: denied by shop/deny-all' }));
  m.record(outbound('failed', { mode: 'passthrough', reason: 'connect 10.244.2.7:8080: refused (ECONNREFUSED)' }));
  m.record(outbound('failed', { mode: 'hbone', reason: 'HBONE tls: certificate rejected' }));
  m.record(outbound('denied', { reason: 'self-call: loopback destination on a proxy port' }));
  m.record(inbound('forwarded', { mode: 'hbone', downstream: { src: '10.244.1.5:52000', dst: '10.244.2.7:15008' } }));
  m.record(inbound('closed-by-policy', { downstream: { src: '10.244.1.5:52000', dst: '10.244.2.7:15008' } }));
  m.record(
    inbound('closed', {
      mode: 'hbone',
      downstream: { src: '10.244.1.5:52000', dst: '10.244.2.7:15008' },
      bytesSent: 1,
    }),
  );
  const flags = (name: string): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const [k, v] of metrics.values.get(name) ?? new Map<string, number>()) {
      const f = Object.fromEntries(JSON.parse(k) as [string, string][])['response_flags']!;
      out[f] = (out[f] ?? 0) + v;
    }
    return out;
  };
  expect(flags('istio_tcp_connections_opened_total')).toEqual({ '-': 4 });
  expect(flags('istio_tcp_connections_closed_total')).toEqual({ DENY: 2, CONNECT: 1, TLS_FAILURE: 1 });
  expect(flags('istio_tcp_connections_failed_total')).toEqual({ DENY: 2, CONNECT: 1, TLS_FAILURE: 1 });
  expect(flags('istio_tcp_sent_bytes_total')).toEqual({ DENY: 1 });
});
