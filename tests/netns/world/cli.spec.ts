/**
 * `ambient-lab up / status / exec / down` as a new user runs them (the built CLI, as root):
 * up --nodes 2 --pods 2 leaves agents and proxies ready and every demo pod Running with the
 * annotation and the rules; exec runs in a pod as its uid and reaches another pod's app through
 * the proxy; down removes every namespace and process and is safe to run twice.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import { netnsWorldFactory } from '../../../e2e/netns/world.js';
import { runCli, type CliRun } from '../../cli-run.js';
import { listNetns } from '../../../e2e/netns/ip.js';
import { isOurs, type LabState } from '../../../e2e/netns/world-lab.js';

const avail = netnsWorldFactory.available();
test.skip(!avail.ok, avail.reason);
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const NAME = `cli-${process.pid}`;

const cli = (args: string[]): Promise<CliRun> => runCli(args, { timeoutMs: 300_000 });

test('up --nodes 2 --pods 2, status, exec, down (twice)', async () => {
  const up = await cli(['up', '--nodes', '2', '--pods', '2', '--name', NAME]);
  try {
    expect(up.stderr).toBe('');
    expect(up.code).toBe(0);
    const state = JSON.parse(fs.readFileSync(`/run/ambient-lab/${NAME}/state.json`, 'utf8')) as LabState;
    // a lab that stays up keeps its proxies' projected tokens fresh (12 h tokens), as kubelet would
    expect(state.tokenRefresher?.pid).toBeGreaterThan(0);
    expect(fs.readFileSync(`/run/ambient-lab/${NAME}/token-refresher.log`, 'utf8')).toContain(
      'token refresher running',
    );
    const st = await cli(['status', '--name', NAME, '--json']);
    expect(st.code).toBe(0);
    const s = JSON.parse(st.stdout) as {
      nodes: { agent: { ready: boolean }; proxy: { ready: boolean } }[];
      pods: { pod: string; phase: string; annotation: string; redirection: string; ips: string[] }[];
    };
    expect(s.nodes.map((n) => [n.agent.ready, n.proxy.ready])).toEqual([
      [true, true],
      [true, true],
    ]);
    // the four demo pods, enrolled; the proxies' own pods (host network, not enrolled) beside them
    const demo = s.pods.filter((p) => p.pod.startsWith('demo/'));
    expect(demo).toHaveLength(4);
    for (const p of demo) expect(p).toMatchObject({ phase: 'Running', annotation: 'enabled', redirection: 'enabled' });
    expect(s.pods.filter((p) => !p.pod.startsWith('demo/'))).toEqual([
      expect.objectContaining({
        pod: 'ambient-lab-system/ambient-lab-proxy-node-0',
        phase: 'Running',
        redirection: 'none',
      }),
      expect.objectContaining({
        pod: 'ambient-lab-system/ambient-lab-proxy-node-1',
        phase: 'Running',
        redirection: 'none',
      }),
    ]);
    const text = await cli(['status', '--name', NAME]);
    expect(text.stdout).toContain('demo/node-1-app-1');

    // exec: the pod's uid, and a same-node connection to another pod's app, through the proxy.
    const id = await cli(['exec', '--name', NAME, 'demo/node-0-app-0', '--', 'id', '-u']);
    expect(id.stdout.trim()).toBe('1000');
    const target = s.pods.find((p) => p.pod === 'demo/node-0-app-1')!.ips[0]!;
    const conn = await cli([
      'exec',
      '--name',
      NAME,
      'demo/node-0-app-0',
      '--',
      process.execPath,
      '-e',
      `const s=require('net').connect(8080,'${target}');s.on('error',e=>{console.log('ERR',e.code);process.exit(2)});s.on('data',d=>process.stdout.write(d));s.write('hi\\n')`,
    ]);
    expect(conn.stdout).toBe('ok demo/node-0-app-1\n');
    const log = fs.readFileSync(`/run/ambient-lab/${NAME}/node-0/connections.jsonl`, 'utf8');
    expect(log).toContain('"direction":"outbound"');

    const down = await cli(['down', '--name', NAME]);
    expect(down.code).toBe(0);
    expect((await listNetns()).filter((n) => n.startsWith(state.prefix))).toEqual([]);
    const pids = [
      state.api,
      state.ca,
      state.tokenRefresher,
      ...Object.values(state.components),
      ...Object.values(state.pods).map((p) => p.app),
    ].filter((p) => p !== undefined);
    expect(pids.length).toBe(3 + 4 + 4);
    expect(pids.filter((p) => isOurs(p!))).toEqual([]);
    const again = await cli(['down', '--name', NAME]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('not up');
  } finally {
    await cli(['down', '--name', NAME]);
  }
});
