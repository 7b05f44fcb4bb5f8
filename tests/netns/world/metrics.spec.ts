/**
 * Observability on the real kernel: after known traffic (pod a on node-0 → pod b on node-1 over
 * HBONE), the running proxies and agents are scraped on their ports inside the node's network
 * namespace, as Prometheus would: Istio's TCP metrics with ztunnel's labels and values equal to
 * what the connection log (the witness) recorded, the latency histograms, the process metrics;
 * readiness on 15021 and 8000; the admin port on localhost only (not reachable from another
 * node), its config dump without keys; the agent's enrollment line with its level by name.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execIn } from '../../../e2e/netns/ip.js';
import type { NetnsWorld } from '../../../e2e/netns/world.js';
import type { PodRef } from '../../../scenarios/world.js';
import { parseConnectionLog, type ConnectionLogRecord } from '../../../impl/ztunnel/connection-log.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(300_000);

const a: PodRef = { namespace: 'mesh', name: 'a' };
const b: PodRef = { namespace: 'mesh', name: 'b' };
const ID = 'spiffe://cluster.local/ns/mesh/sa/default'; // both pods run as mesh's default account
const CONNECTIONS = 3;

/** GET http://HOST:PORT/PATH from inside `netns`: the status code and body, or the error code (ECONNREFUSED). */
async function get(
  netns: string,
  host: string,
  port: number,
  p: string,
): Promise<{ code: number | string; body: string }> {
  const script = `require('node:http').get({host:${JSON.stringify(host)},port:${port},path:${JSON.stringify(p)},timeout:5000},(r)=>{let b='';r.setEncoding('utf8');r.on('data',(d)=>b+=d);r.on('end',()=>console.log(JSON.stringify({code:r.statusCode,body:b})))}).on('error',(e)=>console.log(JSON.stringify({code:e.code,body:e.message})))`;
  return JSON.parse(await execIn(netns, [process.execPath, '-e', script], undefined, 30_000)) as {
    code: number | string;
    body: string;
  };
}

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** Prometheus text exposition → samples (label values unescaped). */
function parseProm(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** Sum of the samples of `name` whose labels include `match`. */
function sum(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((acc, s) => acc + s.value, 0);
}

function nodeOf(w: NetnsWorld, name: string): { netns: string; address: string; dir: string } {
  const n = w.lab.state.nodes.find((x) => x.name === name)!;
  return { netns: n.netns, address: n.address, dir: w.lab.nodeDir(name) };
}

function closedRecords(dir: string, direction: ConnectionLogRecord['direction']): ConnectionLogRecord[] {
  const { records, errors } = parseConnectionLog(fs.readFileSync(path.join(dir, 'connections.jsonl'), 'utf8'));
  expect(errors).toEqual([]);
  return records.filter((r) => r.event === 'closed' && r.direction === direction);
}

test('scraped after known traffic: Istio TCP metrics match the connection log, histograms and process metrics are there, readiness answers, admin stays on localhost', async () => {
  await withNetnsWorld({ nodes: 2 }, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.createPod({ ...a, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [] } });
    await w.createPod({ ...b, node: 'node-1', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.settle();
    for (let i = 0; i < CONNECTIONS; i++) {
      const r = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 });
      expect(r.outcome, r.trace).toBe('established');
    }
    const n0 = nodeOf(w, 'node-0');
    const n1 = nodeOf(w, 'node-1');
    // the relays end after the client does: wait (bounded) for both proxies' 'closed' records
    const deadline = Date.now() + 30_000;
    while (
      (closedRecords(n0.dir, 'outbound').length < CONNECTIONS ||
        closedRecords(n1.dir, 'inbound-hbone').length < CONNECTIONS) &&
      Date.now() < deadline
    )
      await new Promise((r) => setTimeout(r, 200));
    const out = closedRecords(n0.dir, 'outbound');
    const inb = closedRecords(n1.dir, 'inbound-hbone');
    expect(out).toHaveLength(CONNECTIONS);
    expect(inb).toHaveLength(CONNECTIONS);

    const scrape = async (node: { netns: string }, port: number): Promise<Sample[]> => {
      const r = await get(node.netns, '127.0.0.1', port, '/metrics');
      expect(r.code, r.body).toBe(200);
      return parseProm(r.body);
    };
    const proxy0 = await scrape(n0, 15020);
    const proxy1 = await scrape(n1, 15020);
    const workloads = {
      source_workload: 'a',
      source_workload_namespace: 'mesh',
      destination_workload: 'b',
      destination_workload_namespace: 'mesh',
      destination_principal: ID,
      source_principal: ID,
      connection_security_policy: 'mutual_tls',
      request_protocol: 'tcp',
    };
    const src = { ...workloads, reporter: 'source' };
    const dst = { ...workloads, reporter: 'destination' };
    expect(sum(proxy0, 'istio_tcp_connections_opened_total', src)).toBe(CONNECTIONS);
    expect(sum(proxy0, 'istio_tcp_connections_closed_total', { ...src, response_flags: '-' })).toBe(CONNECTIONS);
    expect(sum(proxy1, 'istio_tcp_connections_opened_total', dst)).toBe(CONNECTIONS);
    expect(sum(proxy1, 'istio_tcp_connections_closed_total', { ...dst, response_flags: '-' })).toBe(CONNECTIONS);
    // bytes: request (client → server) is "received", response "sent"; equal to the witness's counts
    const total = (rs: ConnectionLogRecord[], f: 'bytesSent' | 'bytesReceived'): number =>
      rs.reduce((acc, r) => acc + (r[f] ?? 0), 0);
    expect(total(inb, 'bytesSent'), 'the app answered every connection').toBeGreaterThan(0);
    expect(sum(proxy0, 'istio_tcp_received_bytes_total', src)).toBe(total(out, 'bytesSent'));
    expect(sum(proxy0, 'istio_tcp_sent_bytes_total', src)).toBe(total(out, 'bytesReceived'));
    expect(sum(proxy1, 'istio_tcp_received_bytes_total', dst)).toBe(total(inb, 'bytesReceived'));
    expect(sum(proxy1, 'istio_tcp_sent_bytes_total', dst)).toBe(total(inb, 'bytesSent'));
    expect(sum(proxy0, 'ambient_lab_proxy_connection_duration_seconds_count', { direction: 'outbound' })).toBe(
      CONNECTIONS,
    );
    expect(sum(proxy1, 'ambient_lab_proxy_connection_duration_seconds_count', { direction: 'inbound-hbone' })).toBe(
      CONNECTIONS,
    );
    for (const s of [proxy0, proxy1]) {
      expect(sum(s, 'process_resident_memory_bytes')).toBeGreaterThan(0);
      expect(s.some((x) => x.name === 'nodejs_heap_size_used_bytes')).toBe(true);
    }
    // the second name for the same text, as ztunnel's
    expect((await get(n0.netns, '127.0.0.1', 15020, '/stats/prometheus')).body).toContain(
      'istio_tcp_connections_opened_total',
    );

    for (const [node, pod] of [
      [n0, a],
      [n1, b],
    ] as const) {
      const agent = await scrape(node, 15014);
      expect(sum(agent, 'istio_cni_plugin_requests_total', { response_code: '200' })).toBeGreaterThanOrEqual(1);
      expect(
        sum(agent, 'ambient_lab_agent_cni_event_duration_seconds_count', { kind: 'add', result: 'ok' }),
      ).toBeGreaterThanOrEqual(1);
      expect(sum(agent, 'ambient_lab_agent_enrollment_duration_seconds_count')).toBeGreaterThanOrEqual(1);
      expect(
        sum(agent, 'ambient_lab_agent_zds_round_trip_seconds_count', { request: 'add', result: 'ack' }),
      ).toBeGreaterThanOrEqual(1);
      expect(sum(agent, 'ambient_lab_agent_reconcile_duration_seconds_count')).toBeGreaterThanOrEqual(1);
      expect(sum(agent, 'nodeagent_reconcile_events_total', { type: 'add' })).toBeGreaterThanOrEqual(1);
      expect(sum(agent, 'ztunnel_connected')).toBe(1);
      expect(sum(agent, 'process_resident_memory_bytes')).toBeGreaterThan(0);
      // one line per enrollment, level by name, with its documented fields
      const enrolled = fs
        .readFileSync(path.join(node.dir, 'agent.log'), 'utf8')
        .split('\n')
        .filter((l) => l.includes('"msg":"pod enrolled"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(enrolled.map((e) => e['pod'])).toContain(`${pod.namespace}/${pod.name}`);
      expect(enrolled[0]).toMatchObject({ level: 'info', profile: w.lab.state.profile });
      expect(Object.keys(enrolled[0]!)).toEqual(expect.arrayContaining(['uid', 'netns', 'ips', 'node']));

      // readiness where the kubelet probes it; nothing sensitive on the public ports
      expect((await get(node.netns, node.address, 15021, '/healthz/ready')).code).toBe(200);
      expect((await get(node.netns, node.address, 8000, '/readyz')).code).toBe(200);
      expect((await get(node.netns, node.address, 15020, '/status')).code).toBe(404);
      expect((await get(node.netns, node.address, 15014, '/status')).code).toBe(404);
    }

    // admin: on localhost in the node's netns, not on the node's address, not from another node
    const dump = await get(n1.netns, '127.0.0.1', 15000, '/config_dump');
    expect(dump.code).toBe(200);
    expect(dump.body).not.toMatch(/PRIVATE KEY/);
    const cfg = JSON.parse(dump.body) as {
      workloads: { name: string; identity: string }[];
      certificates: { held: { identity: string }[] };
    };
    expect(cfg.workloads.map((x) => x.name)).toEqual(expect.arrayContaining(['a', 'b']));
    expect(cfg.certificates.held.map((c) => c.identity)).toContain(ID);
    expect((await get(n1.netns, n1.address, 15000, '/config_dump')).code).toBe('ECONNREFUSED');
    expect((await get(n0.netns, n1.address, 15000, '/config_dump')).code).toBe('ECONNREFUSED');
  });
});
