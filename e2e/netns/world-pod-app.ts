/**
 * The application container of a netns-world pod: listens on the pod's TCP ports (0.0.0.0 and,
 * when the pod has IPv6, ::) and UDP ports, and writes one JSON line per accepted connection or
 * datagram to its report fd: {"ev":"accept","port","peer","local","tag"}. The tag is the first
 * line the client sent (the world's probes send a unique tag; `HOLD <tag>` holds the connection open,
 * see HOLD_PREFIX). A client that sends an HTTP
 * request gets a small HTTP answer, anything else gets `ok <pod>` — so a user of `ambient-lab
 * exec` can try it with curl or `node -e`. The report fd is a socket pair to the harness that
 * started it (NetnsLab.startApp), so its records are attributable to it alone; once that harness
 * has exited (`ambient-lab up`), reports are dropped and the app keeps serving. Runs detached as
 * the pod's uid and capabilities — a non-root app is started as root with only CAP_SETUID and
 * CAP_SETGID and drops to its uid itself (--drop-to UID:GID) before it listens, which leaves it
 * non-dumpable (startApp says why); the runtime sets AMBIENT_LAB_POD_UID in its environment (see
 * impl/linux/netns-finder-proc.ts).
 *
 *   node world-pod-app.js --pod ns/name --report-fd 3 [--drop-to 1000:1000] [--tcp 80,8080] [--udp 53]
 *   node world-pod-app.js --pod ns/name --report FILE [--tcp 80,8080] [--udp 53]     (the kind world: /dev/stdout)
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
  return text
    .split(',')
    .filter((s) => s !== '')
    .map(Number);
}

function endpoint(address: string | undefined, port: number | undefined): string {
  const a = (address ?? '?').replace(/^::ffff:/, '');
  return a.includes(':') ? `[${a}]:${port}` : `${a}:${port}`;
}

const pod = arg('pod');
// The netns world passes a socket pair as fd 3 (--report-fd); the kind world's container writes
// to /dev/stdout (--report), which its runtime keeps per container (kubectl logs).
const reportFd = arg('report-fd', '');
const report = reportFd !== '' ? Number(reportFd) : fs.openSync(arg('report'), 'a', 0o644);
let reportLost = false;
const write = (o: Record<string, unknown>): void => {
  if (reportLost) return;
  try {
    // Written before the client gets its answer: when the client sees the reply, the record is sent.
    fs.writeSync(report, `${JSON.stringify(o)}\n`);
  } catch (e) {
    // EPIPE: the harness that started this app has gone (ambient-lab up); keep serving.
    reportLost = true;
    process.stderr.write(
      `world-pod-app ${pod}: report fd ${report}: ${e instanceof Error ? e.message : String(e)}; reports are dropped from now on\n`,
    );
  }
};

/** Drop from root to uid:gid (and with it every capability); see the file comment. */
function dropTo(spec: string): void {
  const m = /^(\d+):(\d+)$/.exec(spec);
  if (!m) throw new Error(`world-pod-app: --drop-to ${JSON.stringify(spec)}: expected UID:GID`);
  const { setgroups, setgid, setuid } = process;
  if (!setgroups || !setgid || !setuid)
    throw new Error('world-pod-app: --drop-to needs a POSIX platform (process.setuid)');
  setgroups([]);
  setgid(Number(m[2]));
  setuid(Number(m[1]));
}

/**
 * A client whose first line is `HOLD <tag>` holds the connection: the app reports the accept with
 * `<tag>`, answers `held <pod>`, and keeps the connection open; each later line L is reported as
 * {"ev":"data","tag":L} and answered `ack L`, until the client ends it.
 */
const HOLD_PREFIX = 'HOLD ';

function serveTcp(port: number, host: string): Promise<void> {
  const server = net.createServer((sock) => {
    const peer = endpoint(sock.remoteAddress, sock.remotePort);
    const local = endpoint(sock.localAddress, sock.localPort);
    let buf = '';
    let reported = false;
    let held = false;
    const done = (tag: string | undefined): void => {
      if (reported) return;
      reported = true;
      const hold = tag !== undefined && tag.startsWith(HOLD_PREFIX) ? tag.slice(HOLD_PREFIX.length) : undefined;
      write({ ev: 'accept', port, peer, local, tag: hold ?? tag });
      if (hold !== undefined) {
        // A held connection (the world's holdConnection): stays open; every later line is reported, then echoed.
        held = true;
        buf = buf.slice(buf.indexOf('\n') + 1);
        sock.write(`held ${pod}\n`);
        echoLines();
        return;
      }
      if (tag?.startsWith('GET ') || tag?.startsWith('HEAD ')) {
        const body = `hello from ${pod}\n`;
        sock.end(`HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      } else sock.end(`ok ${pod}\n`);
    };
    const echoLines = (): void => {
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        write({ ev: 'data', port, peer, tag: line });
        sock.write(`ack ${line}\n`);
      }
    };
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      buf += d;
      if (held) return echoLines();
      const nl = buf.indexOf('\n');
      if (nl >= 0) done(buf.slice(0, nl).replace(/\r$/, ''));
    });
    sock.on('end', () => (held ? sock.end() : done(buf === '' ? undefined : buf)));
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
  s.on('message', (msg, r) =>
    write({ ev: 'datagram', port, peer: endpoint(r.address, r.port), tag: msg.toString('utf8') }),
  );
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
  const drop = arg('drop-to', '');
  if (drop !== '') dropTo(drop);
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
  // A pod's container runs until it is stopped, listening or not: an app with no ports (a
  // hostNetwork attacker pod) would otherwise end as soon as its event loop is empty.
  setInterval(() => undefined, 1 << 30);
}

main().catch((e: unknown) => {
  process.stderr.write(`world-pod-app: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
