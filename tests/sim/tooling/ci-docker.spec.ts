/**
 * .ci/docker.sh (sourced by .ci/run) against FAKE `id`, `ip`, `docker`, `dockerd` and `debootstrap`
 * on PATH, so no daemon is started and nothing here touches a network: a dockerd is started only
 * when none answers, with exactly the flags that add nothing to the root network namespace; a
 * link appearing there, or a dockerd that never answers, makes Docker "unavailable: <reason>" and
 * stops it; stop_dockerd stops only the one it started.
 */
import { test, expect } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

interface Fakes {
  /** `id -u` prints this. */
  readonly uid?: number;
  /** A daemon answers before start_docker runs. */
  readonly answering?: boolean;
  /** The fake dockerd adds a `docker0` link once it answers. */
  readonly addsLink?: boolean;
  /** The fake dockerd exits at once with this on stderr. */
  readonly dies?: string;
}

interface Outcome {
  readonly docker: string;
  /** The fake dockerd's argv, or undefined when it was never started. */
  readonly dockerdArgv: string | undefined;
  /** Whether the started dockerd was gone after stop_dockerd (undefined: none started). */
  readonly stopped: boolean | undefined;
  readonly out: string;
}

function runStartDocker(f: Fakes): Outcome {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-ci-docker-'));
  try {
    const bin = path.join(dir, 'bin');
    fs.mkdirSync(bin);
    const marker = path.join(dir, 'answering');
    if (f.answering) fs.writeFileSync(marker, '');
    const fake = (name: string, body: string): void =>
      fs.writeFileSync(path.join(bin, name), `#!/bin/bash\n${body}\n`, { mode: 0o755 });
    fake('id', `[ "$1" = -u ] && echo ${f.uid ?? 0}`);
    fake('docker', `[ "$1" = info ] && [ -e ${marker} ]`);
    fake('debootstrap', 'exit 0');
    fake(
      'ip',
      `echo 'lo UNKNOWN 00:00:00:00:00:00 <LOOPBACK,UP,LOWER_UP>'\necho 'eth0 UP 02:00:00:00:00:01 <BROADCAST,UP>'\n${f.addsLink ? `[ -e ${marker} ] && echo 'docker0 DOWN 02:42:00:00:00:01 <NO-CARRIER,BROADCAST>'` : ''}\nexit 0`,
    );
    fake(
      'dockerd',
      f.dies !== undefined
        ? `echo "$*" > ${dir}/dockerd.argv\necho ${JSON.stringify(f.dies)} >&2\nexit 1`
        : `echo "$*" > ${dir}/dockerd.argv\necho $$ > ${dir}/dockerd.pid\n(sleep 0.3; touch ${marker}) &\nexec sleep 300`,
    );
    const script = [
      '. .ci/docker.sh',
      'start_docker',
      'echo "RESULT=$AMBIENT_LAB_DOCKER"',
      'stop_dockerd',
      // the fake dockerd's own pid (exec keeps it): gone after start_docker or stop_dockerd stopped it
      `if [ -e ${dir}/dockerd.pid ]; then kill -0 "$(cat ${dir}/dockerd.pid)" 2>/dev/null && echo STOPPED=no || echo STOPPED=yes; fi`,
    ].join('\n');
    const out = execFileSync('bash', ['--norc', '-c', script], {
      cwd: ROOT,
      env: { PATH: `${bin}:/usr/bin:/bin`, TMPDIR: dir, DOCKERD_WAIT_S: '10' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    const argvFile = path.join(dir, 'dockerd.argv');
    const stopped = /STOPPED=(yes|no)/.exec(out)?.[1];
    return {
      docker: /RESULT=(.*)/.exec(out)?.[1] ?? '',
      dockerdArgv: fs.existsSync(argvFile) ? fs.readFileSync(argvFile, 'utf8').trim() : undefined,
      stopped: stopped === undefined ? undefined : stopped === 'yes',
      out,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const FLAGS = '--bridge=none --iptables=false --ip6tables=false --ip-forward=false';

test('a daemon that answers is used as it is: none started, none stopped', () => {
  const o = runStartDocker({ answering: true });
  expect(o).toMatchObject({ docker: 'available', dockerdArgv: undefined, stopped: undefined });
});

test('none answers: dockerd starts with nothing for the root netns, and stop_dockerd stops that one', () => {
  const o = runStartDocker({});
  expect(o.dockerdArgv).toBe(FLAGS);
  expect(o.docker).toBe('available');
  expect(o.stopped).toBe(true);
  expect(o.out).toMatch(/ci: started dockerd \(pid \d+, log .*ambient-lab-dockerd\./);
});

test('a dockerd that adds a link to the root netns is stopped and Docker is unavailable, naming the link', () => {
  const o = runStartDocker({ addsLink: true });
  expect(o.dockerdArgv).toBe(FLAGS);
  expect(o.docker).toBe('unavailable: dockerd added links to the root network namespace: docker0 ');
  expect(o.stopped).toBe(true);
});

test('a dockerd that dies: unavailable with the end of its log, at once', () => {
  const t0 = Date.now();
  const o = runStartDocker({ dies: 'failed to start daemon: no cgroup mount' });
  expect(o.docker).toMatch(/^unavailable: dockerd did not answer within 10 s: failed to start daemon: no cgroup mount/);
  expect(Date.now() - t0).toBeLessThan(8_000); // the wait ends when the process is gone
});

test('not root and no daemon answers: unavailable, saying so; nothing started', () => {
  const o = runStartDocker({ uid: 1000 });
  expect(o).toMatchObject({
    docker: 'unavailable: not root: cannot install docker.io or start dockerd, and no Docker daemon answers',
    dockerdArgv: undefined,
  });
});
