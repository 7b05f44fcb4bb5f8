/**
 * The real-kernel world's ground rules: a run builds a private topology in namespaces it owns,
 * real TCP crosses it, iptables in one namespace is invisible to the root namespace, and
 * everything is removed afterwards.
 */
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../worlds.js';
import { NetnsRun } from '../../e2e/netns/netns-run.js';
import { execIn, ipIn, run } from '../../e2e/netns/ip.js';

const world = netnsWorld();
test.skip(!world.available, world.reason);

test('a veth pair between two private namespaces carries TCP, and cleanup leaves nothing', async () => {
  const rootLinksBefore = await run(['ip', '-o', 'link', 'show']);
  const rootRulesBefore = await run(['iptables-save']).catch(() => '');
  const lab = new NetnsRun();
  try {
    const a = await lab.create('a');
    const b = await lab.create('b');
    await ipIn(a, ['link', 'add', 'veth-a', 'type', 'veth', 'peer', 'name', 'veth-b', 'netns', b]);
    await ipIn(a, ['addr', 'add', '10.244.250.1/30', 'dev', 'veth-a']);
    await ipIn(b, ['addr', 'add', '10.244.250.2/30', 'dev', 'veth-b']);
    await ipIn(a, ['link', 'set', 'veth-a', 'up']);
    await ipIn(b, ['link', 'set', 'veth-b', 'up']);

    // A REDIRECT in b's nat table: a connection to port 80 must land on the listener at 8080.
    await execIn(
      b,
      ['iptables-restore'],
      '*nat\n-A PREROUTING -p tcp --dport 80 -j REDIRECT --to-ports 8080\nCOMMIT\n',
    );
    const server = execIn(
      b,
      [
        process.execPath,
        '-e',
        `
      const net = require('node:net');
      const s = net.createServer((c) => { c.end('hello from ' + c.localAddress + ':' + c.localPort + '\\n'); s.close(); });
      s.listen(8080, '10.244.250.2', () => console.error('ready'));
      setTimeout(() => process.exit(2), 20000).unref();
    `,
      ],
      undefined,
      25_000,
    );
    let reply = '';
    for (let i = 0; i < 50 && reply === ''; i++) {
      reply = await execIn(a, [
        process.execPath,
        '-e',
        `
        const c = require('node:net').connect(80, '10.244.250.2');
        let d = ''; c.on('data', (x) => d += x); c.on('end', () => { process.stdout.write(d); });
        c.on('error', () => process.exit(0));
      `,
      ]);
      if (reply === '') await new Promise((r) => setTimeout(r, 100));
    }
    expect(reply.trim()).toBe('hello from 10.244.250.2:8080');
    await server;

    const saved = await execIn(b, ['iptables-save', '-t', 'nat']);
    expect(saved).toContain('-A PREROUTING -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 8080');
    // The root namespace saw none of it.
    expect(await run(['ip', '-o', 'link', 'show'])).toBe(rootLinksBefore);
    expect(await run(['iptables-save']).catch(() => '')).toBe(rootRulesBefore);
  } finally {
    await lab.dispose();
  }
  expect(await lab.remaining()).toEqual([]);
});
