/**
 * The counterexample explorer in a real browser (Debian's chromium): `check --html DIR` of a run
 * with an unexpected bypass (a strict rule mutant that lets inbound traffic past the proxy) and
 * `trace LAB --html FILE` are loaded from disk, offline; the matrix cells must say what the JSON
 * report says, a click opens the cell's panel with its expected verdict and reason, its shrunk
 * history, its replay command and its packet path drawn step by step across namespaces.
 * AMBIENT_LAB_DOCS_SCREENSHOT=1 also writes the screenshot docs/images/explorer.png.
 */
import { test, expect } from '@playwright/test';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { pathOfEvents, pathOfText } from '../../cli/html/packet-path.js';
import type { CheckReport } from '../../scenarios/model/check.js';
import { parseLab } from '../../sim/lab/lab-file.js';
import { runLab } from '../../sim/lab/run-lab.js';
import { browserWorld } from '../worlds.js';

const b = browserWorld();
test.skip(!b.available, b.reason);

const CLI = path.resolve('bin/ambient-lab.js');
const MUTANT = 'ipv4 remove mangle/prert/tproxy-inbound';
const LAB = 'fixtures/labs/inpod.yaml';
let dir: string;
let report: CheckReport;

test.beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-explorer-'));
  const r = spawnSync(
    process.execPath,
    [CLI, 'check', '--seed', '3', '--properties', 'inbound-capture,outbound-capture', '--threats', 'app-nonroot']
      .concat(['--profiles', 'strict', '--runs', '40', '--mutant', MUTANT, '--workers', '1'])
      .concat(['--out', path.join(dir, 'cx'), '--html', path.join(dir, 'report'), '--json']),
    { encoding: 'utf8', timeout: 180_000 },
  );
  expect(r.status, r.stderr).toBe(1);
  report = JSON.parse(r.stdout) as CheckReport;
  expect(r.stderr).toContain(`check: HTML report: ${path.join(dir, 'report', 'index.html')}`);
  const t = spawnSync(process.execPath, [CLI, 'trace', LAB, '--html', path.join(dir, 'trace.html')], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(t.status, t.stderr).toBe(0);
});

test.afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

test('check --html: the matrix says what the report says; a cell opens its counterexample and its packet path', async ({
  page,
}) => {
  // offline: any request that is not the file itself fails the test
  const requests: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  const index = pathToFileURL(path.join(dir, 'report', 'index.html')).href;
  await page.goto(index);
  await expect(page.locator('p.verdict')).toHaveAttribute('data-ok', 'false');

  const cells = page.locator('td[data-cell]');
  await expect(cells).toHaveCount(report.cells.length);
  for (const c of report.cells) {
    const td = page.locator(`td[data-cell="${c.property}|${c.threat}|${c.profile}"]`);
    await expect(td).toHaveAttribute('data-status', c.status);
  }
  const cxOf = (c: CheckReport['cells'][number]) =>
    report.counterexamples.find((x) => x.property === c.property && x.threat === c.threat && x.profile === c.profile);
  const bad = report.cells.find((c) => c.status === 'unexpected bypass' && cxOf(c) !== undefined)!;
  const f = cxOf(bad)!;
  expect(f.trace, 'the counterexample has a packet trace').toBeDefined();

  // every panel starts closed; a click opens exactly this cell's
  await expect(page.locator('section.cell:visible')).toHaveCount(0);
  await page.locator(`td[data-cell="${bad.property}|${bad.threat}|${bad.profile}"]`).click();
  const panel = page.locator('section.cell:visible');
  await expect(panel).toHaveCount(1);
  await expect(panel).toHaveAttribute('data-panel', `${bad.property}|${bad.threat}|${bad.profile}`);
  await expect(panel.locator('p.expected')).toContainText(`Expected: ${bad.expected!.verdict}`);
  await expect(panel.locator('p.expected')).toContainText(bad.expected!.why.slice(0, 40));
  await expect(panel.locator('ol.history li')).toHaveCount(f.steps.length);
  await expect(panel.locator('code.replay')).toHaveText(f.replay);

  // the drawn path: the steps of the trace, in order, in their namespaces' lanes
  const steps = pathOfText(f.trace!);
  const drawn = panel.locator('.path .step');
  await expect(drawn).toHaveCount(steps.length);
  const lanes = [...new Set(steps.flatMap((s) => [s.ns, s.toNs]).filter((n): n is string => n !== undefined))];
  await expect(panel.locator('.path .lane-head')).toHaveText(lanes);
  const kinds = await drawn.evaluateAll((els) =>
    els.map((e) => [e.getAttribute('data-kind'), e.getAttribute('data-ns')]),
  );
  expect(kinds).toEqual(steps.map((s) => [s.kind, s.ns ?? null]));
  // the violating delivery is drawn, in the victim's namespace, green
  const deliver = panel.locator('.path .step[data-kind="deliver"]').last();
  await expect(deliver).toHaveClass(/c-deliver/);
  await expect(deliver).toContainText(
    `"${f.attempt!.to.kind === 'pod' ? `${f.attempt!.to.pod.namespace}/${f.attempt!.to.pod.name}` : ''}/app"`,
  );
  // tables list the rules they ran
  const firstTable = panel.locator('.path .step[data-kind="table"]').first();
  await expect(firstTable.locator('ul.rules li')).toHaveCount(steps.find((s) => s.kind === 'table')!.rules.length);

  // another cell replaces the panel
  const other = report.cells.find((c) => c !== bad)!;
  await page.locator(`td[data-cell="${other.property}|${other.threat}|${other.profile}"]`).click();
  await expect(page.locator('section.cell:visible')).toHaveAttribute(
    'data-panel',
    `${other.property}|${other.threat}|${other.profile}`,
  );
  expect(
    requests.every((u) => u === index),
    requests.join('\n'),
  ).toBe(true);

  // the screenshot in the docs: the differing cell open
  await page.setViewportSize({ width: 1400, height: 1900 });
  await page.locator(`td[data-cell="${bad.property}|${bad.threat}|${bad.profile}"]`).click();
  await page.evaluate('window.scrollTo(0, 0)');
  const shot = await page.screenshot({ fullPage: false });
  await test.info().attach('explorer', { body: shot, contentType: 'image/png' });
  if (process.env['AMBIENT_LAB_DOCS_SCREENSHOT'] === '1') fs.writeFileSync('docs/images/explorer.png', shot);
});

test('trace --html: one section per attempt with its outcome, its drawn path equal to its trace events', async ({
  page,
}) => {
  const run = runLab(parseLab(fs.readFileSync(LAB, 'utf8'), LAB), LAB);
  await page.goto(pathToFileURL(path.join(dir, 'trace.html')).href);
  const sections = page.locator('section.attempt');
  await expect(sections).toHaveCount(run.results.length);
  for (const r of run.results) {
    const s = page.locator(`section.attempt[data-attempt="${r.name}"]`);
    await expect(s).toHaveAttribute('data-outcome', r.outcome);
    const steps = pathOfEvents(r.trace);
    await expect(s.locator('.path .step')).toHaveCount(steps.length);
    await expect(s.locator('.path .step.c-nat')).toHaveCount(
      steps.filter((x) => x.kind === 'nat' || (x.kind === 'table' && /: (NAT|TPROXY)/.test(x.text))).length,
    );
  }
  await expect(page.locator('tr[data-listener]')).toHaveCount(run.listeners.length);
});
