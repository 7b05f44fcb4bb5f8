/**
 * Strict's spoofed-mark drop (filter/out/drop-spoofed-proxy-mark: mark 0x539 from a socket that
 * is not the proxy uid's) must not drop what the kernel sends for the proxy's own connections
 * without the proxy's socket: here, the ACKs a TIME_WAIT socket sends when the peer retransmits
 * its FIN. They carry the proxy's mark (tw_mark) and no full socket, so xt_owner sees no socket
 * and `--socket-exists` does not match (checked on this machine's kernel; IPv4 resets from the
 * namespace's control socket do match, hence rule filter/out/rst, tested in live-enroll.spec.ts).
 *
 * Staged on the real kernel: the strict plan in pod a's netns; a proxy-owned socket there (uid
 * 1337, mark 0x539) sends a line and closes first; d's server answers with its FIN while d drops
 * every pure ACK for 1.5 s, so d retransmits the FIN and a's TIME_WAIT socket answers each time.
 * A counter rule in a's raw OUTPUT (before filter) counts those answers.
 */
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import { withCluster } from '../../../e2e/netns/cluster.js';
import { execIn } from '../../../e2e/netns/ip.js';
import { ProbePool, type ProbeOwner } from '../../../e2e/netns/probe.js';
import type { ConnectOutcome } from '../../../e2e/netns/probe-protocol.js';
import { netnsId } from '../../../impl/api/ids.js';
import { port } from '../../../impl/api/ports.js';
import { LinuxNetnsRules } from '../../../impl/linux/netns-rules.js';
import { buildInpodPlan } from '../../../impl/node-agent/rule-builder.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);
test.setTimeout(120_000);

const PROXY: ProbeOwner = { uid: 1337, gid: 1337, caps: ['NET_ADMIN', 'NET_RAW'] };
const PROXY_MARK = 0x539;
const DROP_ACKS = ['INPUT', '-p', 'tcp', '--tcp-flags', 'ALL', 'ACK', '-j', 'DROP'];

/** Reads a line, then on the client's FIN drops pure ACKs for 1.5 s and closes (its FIN is retransmitted meanwhile). */
const SERVER = `
const net = require('node:net');
const { execFileSync } = require('node:child_process');
const drop = JSON.parse(process.argv[1]);
const s = net.createServer((c) => {
  c.on('data', () => {});
  c.on('end', () => {
    execFileSync('iptables', ['-I', ...drop]);
    c.end();
    setTimeout(() => { execFileSync('iptables', ['-D', ...drop]); process.stdout.write('RESTORED\\n'); }, 1500);
  });
  c.on('error', () => {});
});
s.listen({ host: '0.0.0.0', port: 8080 }, () => process.stdout.write('LISTENING\\n'));
process.on('SIGTERM', () => process.exit(0));
`;

/** The packet count of the rule whose iptables-save text is `rule`, in `table`. */
async function packets(netns: string, table: string, rule: string): Promise<number> {
  const saved = await execIn(netns, ['iptables-save', '-c', '-t', table]);
  const line = saved.split('\n').find((l) => l.endsWith(`] ${rule}`));
  if (!line) throw new Error(`no rule ${JSON.stringify(rule)} in ${table} of ${netns}:\n${saved}`);
  return Number(/^\[(\d+):/.exec(line)![1]);
}

test("strict: the proxy's TIME_WAIT ACKs (mark 0x539, no socket) pass the spoofed-mark drop", async () => {
  const pool = new ProbePool();
  try {
    await withCluster({ nodes: 2 }, async (c) => {
      const a = await c.addPod('node-0', 'a');
      const d = await c.addPod('node-1', 'd');
      const plan = buildInpodPlan({
        profile: 'strict',
        proxyUid: 1337,
        probePorts: [port(8080)],
        ipv6: false,
        dnsCapture: true,
        ingressMode: false,
        virtualInterfaces: [],
      });
      await new LinuxNetnsRules().apply(netnsId(a.netnsPath), plan, 'exclusive');
      const twAck =
        '-A OUTPUT -p tcp -m tcp --tcp-flags FIN,SYN,RST,PSH,ACK,URG ACK -m mark --mark 0x539/0xfff -m owner ! --socket-exists';
      await execIn(a.netns, ['iptables', '-t', 'raw', ...twAck.split(' ')]);
      const server = c.spawn(d.netns, [process.execPath, '-e', SERVER, JSON.stringify(DROP_ACKS)]);
      await server.waitForOutput('LISTENING\n');
      const proxy = await pool.get(a.netns, PROXY);
      const out = (await proxy.request({
        op: 'connect',
        tag: 'proxy-leg',
        proto: 'tcp',
        address: d.ipv4!,
        port: 8080,
        mark: PROXY_MARK,
        transparent: false,
        source: undefined,
        sourcePort: undefined,
        timeoutMs: 2_000,
      })) as ConnectOutcome;
      expect(out.result, JSON.stringify(out)).toBe('established');
      await server.waitForOutput('RESTORED\n');
      // d's FIN retransmissions inside the 1.5 s (about 0.2, 0.6 and 1.4 s after the first) met a's TIME_WAIT socket.
      expect(await packets(a.netns, 'raw', twAck)).toBeGreaterThan(0);
      expect(
        await packets(
          a.netns,
          'filter',
          '-A ISTIO_OUTPUT -m mark --mark 0x539/0xfff -m owner --socket-exists ! --uid-owner 1337 -j DROP',
        ),
      ).toBe(0);
      await server.stop();
    });
  } finally {
    await pool.stopAll();
  }
});
