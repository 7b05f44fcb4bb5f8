/**
 * Minimal TCP listener and client programs for namespaces, run as `node -e` so they need no build
 * step. The listener reports every accepted connection as one JSON line; the client prints the
 * listener's greeting or `ERROR <code>`. (The full probe with marks, uids and original-destination
 * reads is a separate component; this is what topology and rule tests need.)
 */
import type { NetnsCluster } from './cluster.js';
import type { NetnsProcess, SpawnOptions } from './processes.js';

interface Accepted {
  readonly local: string;
  readonly localPort: number;
  readonly remote: string;
  readonly remotePort: number;
}

const LISTENER = `
const net = require('node:net');
const [host, port, tag] = process.argv.slice(1);
const s = net.createServer((c) => {
  const info = { local: c.localAddress, localPort: c.localPort, remote: c.remoteAddress, remotePort: c.remotePort };
  process.stdout.write('ACCEPT ' + JSON.stringify(info) + '\\n');
  c.end(tag + ' ' + c.localAddress + ' ' + c.localPort + '\\n');
  c.on('error', () => {});
});
s.on('error', (e) => { process.stderr.write('listen error ' + e.code + '\\n'); process.exit(3); });
s.listen({ host, port: Number(port), ipv6Only: host.includes(':') }, () => process.stdout.write('LISTENING\\n'));
process.on('SIGTERM', () => process.exit(0));
`;

const CLIENT = `
const net = require('node:net');
const [host, port, ms] = process.argv.slice(1);
const c = net.connect({ host, port: Number(port) });
let d = '';
c.setEncoding('utf8');
c.on('data', (x) => { d += x; });
c.on('end', () => { process.stdout.write(d); process.exit(0); });
c.on('error', (e) => { process.stdout.write('ERROR ' + e.code + '\\n'); process.exit(1); });
setTimeout(() => { process.stdout.write('ERROR TIMEOUT\\n'); process.exit(1); }, Number(ms)).unref();
`;

/** Start a listener on host:port in `netns`; resolves once it is listening. It greets with `tag`. */
export async function startListener(
  cluster: NetnsCluster,
  netns: string,
  host: string,
  port: number,
  tag = 'hello',
  opts: SpawnOptions = {},
): Promise<NetnsProcess> {
  const p = cluster.spawn(netns, [process.execPath, '-e', LISTENER, host, String(port), tag], opts);
  await p.waitForOutput('LISTENING\n');
  return p;
}

/** The connections a listener accepted so far, oldest first. */
export function acceptedBy(listener: NetnsProcess): Accepted[] {
  return listener.stdout
    .split('\n')
    .filter((l) => l.startsWith('ACCEPT '))
    .map((l) => JSON.parse(l.slice(7)) as Accepted);
}

/**
 * Connect from `netns` to host:port and return the greeting line (e.g. `hello 10.244.0.2 8080`)
 * or `ERROR <code>` (`ERROR TIMEOUT` after `timeoutMs`).
 */
export async function connectFrom(
  cluster: NetnsCluster,
  netns: string,
  host: string,
  port: number,
  timeoutMs = 5_000,
  opts: SpawnOptions = {},
): Promise<string> {
  const p = cluster.spawn(netns, [process.execPath, '-e', CLIENT, host, String(port), String(timeoutMs)], opts);
  await p.exited;
  return p.stdout.trim();
}
