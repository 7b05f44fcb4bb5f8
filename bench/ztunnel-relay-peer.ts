/**
 * The load generator of bench/ztunnel-relay.ts, run as its own process inside a pod namespace
 * (so the proxy under test does not share an event loop with its load):
 *   sink PORT              accept; for each connection count bytes until EOF, reply "ok", close
 *   echo PORT              accept; echo every byte
 *   source IP PORT BYTES   send BYTES in 64 KiB chunks, half-close, wait for "ok"; prints {"ms":..}
 *   pingpong IP PORT N C [R]  C connections, each N rounds of 1 KiB request / 1 KiB response;
 *                          with R, each connection sends at most R requests/s (open pacing: a
 *                          request goes out at its scheduled time or when the previous answer
 *                          came, whichever is later), so C*R is the offered load; without R as
 *                          fast as answers come. Each connection first makes one untimed
 *                          exchange, then WARMUP (200) untimed rounds: the timed rounds measure
 *                          an established path (through a proxy the first exchange also waits
 *                          for the HBONE tunnel's TLS handshake, which `connects` measures) and
 *                          a load process whose code V8 has already compiled. Prints
 *                          {"p50":..,"p99":..,"samples":[..]} in ms
 *   connects IP PORT N     N connections one after another, each: connect, 1 KiB request, 1 KiB
 *                          response, close; prints {"p50":..,"p99":..} of the whole in ms
 * Prints "ready" when listening.
 */
import * as net from 'node:net';

const [mode, a1, a2, a3, a4] = process.argv.slice(2);
// A name of its own in ps/perf (comm): al-bench-echo, al-bench-pingpong, ...
process.title = `al-bench-${mode ?? 'peer'}`;

function now(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

if (mode === 'sink' || mode === 'echo') {
  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (s) => {
    if (mode === 'echo') {
      s.pipe(s);
      return;
    }
    s.on('data', () => undefined);
    s.on('end', () => s.end('ok'));
    s.on('error', () => undefined);
  });
  server.listen(Number(a1), '0.0.0.0', () => console.log('ready'));
} else if (mode === 'source') {
  const total = Number(a3);
  const chunk = Buffer.alloc(64 * 1024, 7);
  const t0 = now();
  const s = net.connect({ host: a1!, port: Number(a2), noDelay: true, allowHalfOpen: true }, () => {
    let sent = 0;
    const pump = (): void => {
      while (sent < total) {
        sent += chunk.length;
        if (!s.write(chunk)) {
          s.once('drain', pump);
          return;
        }
      }
      s.end();
    };
    pump();
  });
  s.on('data', () => {
    console.log(JSON.stringify({ ms: now() - t0, bytes: total }));
    process.exit(0);
  });
  s.on('error', (e) => {
    console.log(JSON.stringify({ error: e.message }));
    process.exit(1);
  });
} else if (mode === 'pingpong') {
  const rounds = Number(a3);
  const conns = Number(a4);
  const interval = process.argv[7] ? 1000 / Number(process.argv[7]) : 0;
  const samples: number[] = [];
  const req = Buffer.alloc(1024, 1);
  /** One exchange on `s`: resolves with its round-trip time in ms. */
  const exchange = (s: net.Socket): Promise<number> =>
    new Promise((resolve) => {
      let got = 0;
      const onData = (d: Buffer): void => {
        got += d.length;
        if (got < req.length) return;
        s.off('data', onData);
        resolve(now() - t);
      };
      s.on('data', onData);
      const t = now();
      s.write(req);
    });
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
  void (async () => {
    // Open every connection and make one untimed exchange on each before any timed round, so
    // the rounds measure established paths and no round shares the CPU with a handshake.
    const socks = await Promise.all(
      Array.from(
        { length: conns },
        () =>
          new Promise<net.Socket>((resolve, reject) => {
            const s = net.connect({ host: a1!, port: Number(a2), noDelay: true }, () =>
              exchange(s).then(() => resolve(s)),
            );
            s.on('error', reject);
          }),
      ),
    );
    // The first WARMUP rounds of each connection run the same paced code untimed: V8 compiles
    // it (on helper threads that take a CPU from the path under test) during these, not during
    // the timed rounds. Back-to-back exchanges were not enough: the timer path compiled later.
    const warmup = Number(process.env['WARMUP'] ?? 200);
    await Promise.all(
      socks.map(async (s) => {
        const times: number[] = [];
        const start = now() + Math.random() * interval; // spread the connections over one interval
        for (let i = 0; i < warmup + rounds; i++) {
          const wait = start + i * interval - now();
          if (wait > 0) await sleep(wait);
          times.push(await exchange(s)); // warm-up rounds too: the same code throughout, no branch that turns later
        }
        samples.push(...times.slice(warmup));
      }),
    );
    // Close only when every connection is done: a close makes the proxies log and account for
    // that connection, which must not land in another connection's timed rounds.
    for (const s of socks) s.end();
    samples.sort((x, y) => x - y);
    const q = (p: number): number => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))]!;
    console.log(
      JSON.stringify({
        p50: q(0.5),
        p99: q(0.99),
        n: samples.length,
        samples: samples.map((x) => Math.round(x * 1000) / 1000),
      }),
    );
    process.exit(0);
  })().catch((e: Error) => {
    console.log(JSON.stringify({ error: e.message }));
    process.exit(1);
  });
} else if (mode === 'connects') {
  const n = Number(a3);
  const samples: number[] = [];
  const req = Buffer.alloc(1024, 2);
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const t = now();
      let got = 0;
      const s = net.connect({ host: a1!, port: Number(a2), noDelay: true }, () => s.write(req));
      s.on('data', (d: Buffer) => {
        got += d.length;
        if (got < req.length) return;
        samples.push(now() - t);
        s.destroy();
        resolve();
      });
      s.on('error', reject);
    });
  void (async () => {
    for (let i = 0; i < n; i++) await one();
    samples.sort((x, y) => x - y);
    const q = (p: number): number => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))]!;
    console.log(JSON.stringify({ p50: q(0.5), p99: q(0.99), n: samples.length }));
    process.exit(0);
  })().catch((e: Error) => {
    console.log(JSON.stringify({ error: e.message }));
    process.exit(1);
  });
} else {
  console.error(
    `usage: ztunnel-relay-peer sink|echo PORT | source IP PORT BYTES | pingpong IP PORT N C [R] | connects IP PORT N (got ${mode})`,
  );
  process.exit(2);
}
