#!/usr/bin/env node
// `npm run test:netns:loaded`: the netns world suite (playwright --project=netns tests/netns/world)
// three times in a row while a bounded CPU hog keeps both cores busy — evidence that the netns
// world's verdicts wait on observed state, not on time. Plain JavaScript: it only starts
// processes.
//
// The hog: one child process per core (LOADED_HOGS, default 2), each spinning until its own hard
// time limit (LOADED_HOG_LIMIT_S, default 3600 s) even if this runner dies; the runner stops them
// by pid when the runs end, on SIGINT/SIGTERM and on exit — never by name.
// LOADED_RUNS (default 3) sets the number of runs. Each run's exit code, duration and the
// Playwright summary line are printed; the exit code is 1 when any run failed.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';

/** Playwright's CLI, run with this node directly (so SIGINT reaches it, not an npx wrapper). */
const PLAYWRIGHT = createRequire(import.meta.url).resolve('@playwright/test/cli');

const RUNS = Number(process.env.LOADED_RUNS ?? 3);
const HOGS = Number(process.env.LOADED_HOGS ?? 2);
const HOG_LIMIT_S = Number(process.env.LOADED_HOG_LIMIT_S ?? 3600);
for (const [name, v] of [
  ['LOADED_RUNS', RUNS],
  ['LOADED_HOGS', HOGS],
  ['LOADED_HOG_LIMIT_S', HOG_LIMIT_S],
]) {
  if (!Number.isInteger(v) || v < 1) {
    console.error(`loaded-run: ${name}=${v}: expected a positive integer`);
    process.exit(2);
  }
}

/** The hogs this runner started (stopped by pid), and the current Playwright run. */
const started = new Set();
let suite;
let interrupted = false;

function stopAll() {
  for (const pid of started) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  started.clear();
}

process.on('exit', stopAll);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    stopAll();
    // Playwright stops on SIGINT and still runs the tests' cleanup (namespaces, lab processes);
    // a SIGKILL would leave them behind. The runner exits when the run has ended.
    if (suite?.pid !== undefined) {
      interrupted = true;
      process.kill(suite.pid, 'SIGINT');
    } else process.exit(130);
  });
}

// Each hog checks its own deadline, so it ends on its own even if this runner is killed with SIGKILL.
const HOG = `const end = Date.now() + ${HOG_LIMIT_S * 1000}; let x = 0; while (Date.now() < end) { for (let i = 0; i < 1e6; i++) x = (x + i) | 0; }`;
for (let i = 0; i < HOGS; i++) {
  const hog = spawn(process.execPath, ['-e', HOG], { stdio: 'ignore' });
  if (hog.pid === undefined) {
    console.error('loaded-run: could not start a CPU hog');
    process.exit(1);
  }
  started.add(hog.pid);
  hog.on('exit', () => started.delete(hog.pid));
}
console.log(
  `[loaded] ${HOGS} CPU hog(s) spinning (pids ${[...started].join(', ')}, each stops itself after ${HOG_LIMIT_S} s)`,
);

function runSuite() {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const child = spawn(process.execPath, [PLAYWRIGHT, 'test', '--project=netns', 'tests/netns/world'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    suite = child;
    let tail = '';
    child.stdout.on('data', (d) => {
      process.stdout.write(d);
      tail = (tail + d.toString('utf8')).slice(-4000);
    });
    child.on('exit', (code, signal) => {
      suite = undefined;
      const summary = tail
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => /^\d+ (passed|failed|skipped|flaky|did not run)/.test(l))
        .join(', ');
      resolve({ code: code ?? (signal ? 128 : 1), seconds: (Date.now() - t0) / 1000, summary });
    });
  });
}

const results = [];
for (let i = 1; i <= RUNS && !interrupted; i++) {
  console.log(`[loaded] run ${i}/${RUNS} starts ${new Date().toISOString()}`);
  const r = await runSuite();
  results.push(r);
  console.log(
    `[loaded] run ${i}/${RUNS}: ${r.code === 0 ? 'PASS' : `FAIL (exit ${r.code})`} in ${r.seconds.toFixed(0)} s — ${r.summary || 'no summary'}`,
  );
}
stopAll();
console.log('[loaded] summary:');
results.forEach((r, i) =>
  console.log(`[loaded]   run ${i + 1}: ${r.code === 0 ? 'PASS' : 'FAIL'} ${r.seconds.toFixed(0)} s ${r.summary}`),
);
process.exitCode = !interrupted && results.every((r) => r.code === 0) ? 0 : 1;
