/**
 * The latency load generator of bench:ztunnel (bench/ztunnel-relay-peer.ts pingpong): what it
 * times is what the README reports, so its counting is tested like product code. Every
 * connection makes one untimed exchange, WARMUP untimed rounds, then ROUNDS timed ones; only the
 * timed ones are reported; and no connection closes while another one is still exchanging (a
 * close makes the proxies under test log and account for it, which must not land in someone
 * else's timed rounds).
 */
import * as path from 'node:path';
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import { NetnsProcesses } from '../../../e2e/netns/processes.js';
import { execIn } from '../../../e2e/netns/ip.js';
import { repo, withLab } from '../sockets/fixture.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

const peer = path.join(repo, 'dist', 'bench', 'ztunnel-relay-peer.js');

/** An echo server that records, in order, which connection sent data and which ended. */
const RECORDING_ECHO = `
const net = require('node:net');
const conns = Number(process.argv[1]);
const events = [];
const bytes = [];
let ended = 0;
net.createServer({ allowHalfOpen: true }, (s) => {
  const id = bytes.push(0) - 1;
  s.on('data', (d) => { bytes[id] += d.length; events.push(['data', id]); s.write(d); });
  s.on('end', () => {
    events.push(['end', id]);
    s.end();
    if (++ended === conns) { console.log(JSON.stringify({ events, bytes })); process.exit(0); }
  });
}).listen(9001, '127.0.0.1', () => console.log('ready'));
`;

test('pingpong reports exactly ROUNDS x C timed rounds after its warm-up, and closes its connections together after the last', async () => {
  const conns = 6;
  const rounds = 20;
  const warmup = 5;
  // 6 connections at 50/s each, spread over one 20 ms interval: with closes per connection, the
  // first close would come well before the other connections' last rounds.
  await withLab(async (lab) => {
    const { name } = await lab.ns('pp');
    await execIn(name, ['ip', 'link', 'set', 'lo', 'up']);
    const procs = new NetnsProcesses();
    try {
      const echo = procs.spawn(name, ['node', '-e', RECORDING_ECHO, String(conns)]);
      await echo.waitForOutput('ready');
      const pp = procs.spawn(
        name,
        ['node', peer, 'pingpong', '127.0.0.1', '9001', String(rounds), String(conns), '50'],
        { env: { WARMUP: String(warmup) } },
      );
      const result = JSON.parse(await pp.waitForOutput('}', 60_000)) as {
        n: number;
        samples: number[];
        p50: number;
        p99: number;
      };
      const log = JSON.parse((await echo.waitForOutput('}', 10_000)).trim().split('\n').at(-1)!) as {
        events: ['data' | 'end', number][];
        bytes: number[];
      };

      expect(result.n).toBe(rounds * conns);
      expect(result.samples).toHaveLength(rounds * conns);
      expect(result.samples.every((ms) => ms > 0)).toBe(true);
      // Each connection carried the untimed first exchange, the warm-up and the timed rounds.
      expect(log.bytes).toEqual(Array.from({ length: conns }, () => (1 + warmup + rounds) * 1024));
      // No data after the first close: the connections close together, after every round.
      const firstEnd = log.events.findIndex(([kind]) => kind === 'end');
      expect(firstEnd).toBeGreaterThan(0);
      expect(log.events.slice(firstEnd).filter(([kind]) => kind === 'data')).toEqual([]);
    } finally {
      await procs.stopAll();
    }
  });
});
