/**
 * Harness integrity: what a pod can write must not decide a verdict, and a process the lab
 * started is recognised by its identity (pid plus start time), not by a command line every proxy
 * shares.
 *
 * - A pod app (uid 1000) tries every way it has at another uid-1000 pod's records: the app's
 *   report fd through /proc (a socket: not openable; the app is non-dumpable: /proc/PID/fd is
 *   closed to it), a file in the run directory, the app's log. All fail, and the victim's records
 *   hold only what the victim saw. Positive control: an ordinary uid-1000 process (dumpable, as
 *   apps were started before) is open to the same attacker through /proc/PID/fd.
 * - A pid whose start time differs from the recorded one (a recycled pid — here another node's
 *   proxy, which has the same command line) is not taken for the component.
 */
import { test, expect } from '@playwright/test';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isOurs, procStart, type LabPid } from '../../../e2e/netns/world-lab.js';
import { run } from '../../../e2e/netns/ip.js';
import type { PodRef } from '../../../scenarios/world.js';
import { skipUnlessSuiteWorldAvailable, suiteWorld, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const attacker: PodRef = { namespace: 'plain', name: 'x' };
const victim: PodRef = { namespace: 'plain', name: 'v' };

/** Runs as the attacker: each attempt's outcome ('ok' or the error code), as JSON on stdout. */
const ATTACK = `
const fs = require('node:fs');
const [victimPid, dir, log, otherPid] = process.argv.slice(1);
const forged = JSON.stringify({ ev: 'accept', port: 8080, peer: '6.6.6.6:6666', local: '0.0.0.0:8080', tag: 'forged' }) + '\\n';
const tryIt = (f) => { try { f(); return 'ok'; } catch (e) { return e.code || String(e); } };
console.log(JSON.stringify({
  reportFd: tryIt(() => fs.appendFileSync('/proc/' + victimPid + '/fd/3', forged)),
  fdDir: tryIt(() => fs.readdirSync('/proc/' + victimPid + '/fd')),
  runDirFile: tryIt(() => fs.writeFileSync(dir + '/pods/forged.jsonl', forged)),
  appLog: tryIt(() => fs.appendFileSync(log, forged)),
  control: tryIt(() => fs.readdirSync('/proc/' + otherPid + '/fd')),
}));
`;

test("a uid-1000 pod cannot write another pod's records; a pid with another start time is not the component", async () => {
  await withNetnsWorld({}, async (w) => {
    await w.createNamespace('plain');
    await w.createPod({ ...attacker, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.createPod({ ...victim, node: 'node-1', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.settle();
    const x = w.lab.state.pods['plain/x']!;
    const v = w.lab.state.pods['plain/v']!;
    // Positive control: a uid-1000 process started the way apps used to be (setpriv, dumpable).
    const other = spawn(
      'setpriv',
      [
        '--reuid=1000',
        '--regid=1000',
        '--clear-groups',
        '--inh-caps=-all',
        '--bounding-set=-all',
        process.execPath,
        '-e',
        'setTimeout(() => {}, 60000)',
      ],
      { stdio: 'ignore' },
    );
    try {
      // Until it has exec'd node as uid 1000 (observed, not timed): its fd dir is then its own.
      while (!fs.readFileSync(`/proc/${other.pid}/cmdline`, 'utf8').includes('setTimeout'))
        await new Promise((r) => setTimeout(r, 20));
      const out = await run([
        'ip',
        'netns',
        'exec',
        x.netns!,
        'setpriv',
        '--reuid=1000',
        '--regid=1000',
        '--clear-groups',
        '--inh-caps=-all',
        '--bounding-set=-all',
        process.execPath,
        '-e',
        ATTACK,
        String(v.app!.pid),
        w.lab.state.runDir,
        w.lab.appLogFile(v),
        String(other.pid),
      ]);
      const r = JSON.parse(out) as Record<string, string>;
      expect(r['control'], "the attacker can open a dumpable uid-1000 process's fds: the test can see access").toBe(
        'ok',
      );
      expect(r['reportFd']).not.toBe('ok');
      expect(r['fdDir']).toBe('EACCES');
      expect(r['runDirFile']).not.toBe('ok');
      expect(r['appLog']).toBe('EACCES');
    } finally {
      if (other.pid !== undefined) process.kill(other.pid, 'SIGKILL');
    }
    // The victim's records: nothing forged; a real connection from the attacker is attributed to the victim with the attacker's tuple.
    const res = await w.connect({ kind: 'pod', pod: attacker }, { kind: 'pod', pod: victim, port: 8080 });
    expect(res.outcome).toBe('established');
    expect(res.acceptedBy).toBe('app');
    expect(res.deliveries.map((d) => `${d.pod.namespace}/${d.pod.name}`)).toEqual(['plain/v']);
    const records = w.lab.appRecords(v);
    expect(records.some((e) => e.tag === 'forged' || e.peer === '6.6.6.6:6666')).toBe(false);
    expect(records.filter((e) => e.ev === 'accept')).toHaveLength(1);
    expect(path.dirname(w.lab.appLogFile(v))).toBe(path.join(w.lab.state.runDir, 'pods'));

    // Process identity: node-0's proxy is recorded; node-1's proxy runs the same program.
    const p0 = w.lab.state.components['node-0/proxy']!;
    const p1 = w.lab.state.components['node-1/proxy']!;
    expect(isOurs(p0)).toBe(true);
    if (suiteWorld() === 'netns') {
      // Both proxies share a command line, so the marker cannot tell them apart (in the container
      // world the marker names the container, and a command line never contains it).
      expect(p1.marker).toBe(p0.marker);
      // The marker alone (state files without a start time) would take node-1's for node-0's proxy.
      expect(isOurs({ pid: p1.pid, marker: p0.marker })).toBe(true);
    }
    // A recycled pid: the pid of a live proxy with another start time than recorded. The two
    // proxies may start in the same clock tick (start times count ticks; a fast machine did), so
    // the recorded start time is made to differ rather than assumed to.
    const recordedStart = p0.startTime === p1.startTime ? String(Number(p1.startTime) + 1) : p0.startTime!;
    const recycled: LabPid = { pid: p1.pid, marker: p0.marker, startTime: recordedStart };
    expect(recordedStart).not.toBe(p1.startTime);
    expect(isOurs(recycled)).toBe(false);
    w.lab.state.components['node-0/proxy'] = recycled;
    try {
      expect(w.lab.running('proxy', 'node-0')).toBe(false);
      expect((await w.lab.componentStatus('proxy', 'node-0')).running).toBe(false);
    } finally {
      w.lab.state.components['node-0/proxy'] = p0;
    }
    expect(procStart(p0.pid)?.startTime).toBe(p0.startTime);
  });
});
