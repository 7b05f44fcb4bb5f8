/**
 * The application container of a netns-world pod: listens on the pod's TCP ports (0.0.0.0 and,
 * when the pod has IPv6, ::) and UDP ports, and appends one JSON line per accepted connection or
 * datagram to a report file: {"ev":"accept","port","peer","local","tag"}. The tag is the first
 * line the client sent (the world's probes send a unique tag). A client that sends an HTTP
 * request gets a small HTTP answer, anything else gets `ok <pod>` — so a user of `ambient-lab
 * exec` can try it with curl or `node -e`. Runs detached (no pipes to the harness) as the pod's
 * uid and capabilities; the runtime sets AMBIENT_LAB_POD_UID in its environment (see
 * impl/linux/netns-finder-proc.ts).
 *
 *   node world-pod-app.js --pod ns/name --report FILE [--tcp 80,8080] [--udp 53]
 */
import * as dgram from 'node:dgram';
import * as fs from 'node:fs';
import * as net from 'node:net';

function arg(name: string, dflt?: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? process.argv[i + 1] : dflt;
  if (v === undefined) throw new Error(`world-pod-app: --${name} is required`);
  return v;
}

function ports(text: string): number[] {
  return text.split(',').filter((s) => s !== '').map(Number);
}

function endpoint(address: string | undefined, port: number | undefined): string {
  const a = (address ?? '?').replace(/^::ffff:/, '');
  return a.includes(':') ? `[${a}]:${port}` : `${a}:${port}`;
}

const pod = arg('pod');
const report = fs.openSync(arg('report'), 'a', 0o644);
const write = (o: Record<string, unknown>): void => { fs.writeSync(report, `${JSON.stringify(o)}\n`); };

function serveTcp(port: number, host: string): Promise<void> {
  const server = net.createServer((sock) => {
    const peer = endpoint(sock.remoteAddress, sock.remotePort);
    const local = endpoint(sock.localAddress, sock.localPort);
    let buf = '';
    let reported = false;
    const done = (tag: string | undefined): void => {
      if (reported) return;
      reported = true;
      write({ ev: 'accept', port, peer, local, tag });
      if (tag?.startsWith('GET ') || tag?.startsWith('HEAD ')) {
        const body = `hello from ${pod}\n`;
        sock.end(`HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      } else sock.end(`ok ${pod}\n`);
    };
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl >= 0) done(buf.slice(0, nl).replace(/\r$/, ''));
    });
    sock.on('end', () => done(buf === '' ? undefined : buf));
    sock.on('error', () => undefined);
    setTimeout(() => done(undefined), 2_000).unref();
  });
  return new Promise((resolve) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      // A v4-only pod has no ::; anything else is worth a line on stderr.
      if (host !== '::') process.stderr.write(`world-pod-app ${pod}: tcp ${host}:${port}: ${e.message}\n`);
      resolve();
    });
    server.listen({ port, host, ipv6Only: host === '::' }, () => resolve());
  });
}

function serveUdp(port: number, family: 4 | 6): Promise<void> {
  const s = dgram.createSocket({ type: family === 4 ? 'udp4' : 'udp6', ipv6Only: family === 6 });
  s.on('message', (msg, r) => write({ ev: 'datagram', port, peer: endpoint(r.address, r.port), tag: msg.toString('utf8') }));
  return new Promise((resolve) => {
    s.once('error', (e) => {
      // A v4-only pod has no ::.
      if (family === 4) process.stderr.write(`world-pod-app ${pod}: udp ${port}: ${e.message}\n`);
      resolve();
    });
    s.bind(port, family === 4 ? '0.0.0.0' : '::', () => resolve());
  });
}

async function main(): Promise<void> {
  for (const p of ports(arg('tcp', ''))) {
    await serveTcp(p, '0.0.0.0');
    await serveTcp(p, '::');
  }
  for (const p of ports(arg('udp', ''))) {
    await serveUdp(p, 4);
    await serveUdp(p, 6);
  }
  write({ ev: 'ready', pid: process.pid });
  process.on('SIGTERM', () => process.exit(0));
}

main().catch((e: unknown) => {
  process.stderr.write(`world-pod-app: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
