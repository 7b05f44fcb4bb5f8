/**
 * Golden rule files (fixtures/golden/<profile>/<variant>.<v4|v6>.rules): the rendered restore
 * text of every variant, with the plan's ip rules and routes as trailing comment lines. The test
 * regenerates each and compares; `UPDATE_GOLDEN=1` rewrites them. Every file must also satisfy
 * the NetnsRules contract and load into the simulated kernel as is.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, expect } from '@playwright/test';
import { formatMark } from '../../../../impl/api/marks.js';
import type { IpFamily, RedirectionPlan } from '../../../../impl/host/netns-rules.js';
import { parsePlanText } from '../../../../impl/api/netns-rules-restore.js';
import { SimKernel } from '../../../../sim/kernel/kernel.js';
import { buildHostProbeRules, renderIpsetRestore } from '../../../../impl/node-agent/host-probe-rules.js';
import { FAMILIES, variants } from './variants.js';

const repo = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const goldenDir = path.join(repo, 'fixtures', 'golden');
const update = process.env['UPDATE_GOLDEN'] === '1';

function goldenText(plan: RedirectionPlan, family: IpFamily): string | undefined {
  const text = plan.iptables[family];
  if (text === undefined) return undefined;
  const f = family === 'ipv4' ? '-4' : '-6';
  const extra = [
    ...plan.rules
      .filter((r) => r.family === family)
      .map((r) => `# ip ${f} rule add fwmark ${formatMark(r.fwmark)} lookup ${r.table} pref ${r.priority}`),
    ...plan.routes
      .filter((r) => r.family === family)
      .map((r) => `# ip ${f} route add ${r.type} ${r.dst} dev ${r.dev} table ${r.table}`),
  ];
  return extra.length === 0 ? text : `${text}${extra.join('\n')}\n`;
}

const cases = variants()
  .flatMap((v) => FAMILIES.map((family) => ({ v, family, text: goldenText(v.plan, family) })))
  .filter((c): c is typeof c & { text: string } => c.text !== undefined);

test('every variant has a golden file, and no stale golden files remain', () => {
  const expected = cases.map((c) => `${c.v.name}.${c.family === 'ipv4' ? 'v4' : 'v6'}.rules`).sort();
  const onDisk = fs.existsSync(goldenDir)
    ? fs
        .readdirSync(goldenDir, { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.rules'))
        .map((f) => f.split(path.sep).join('/'))
        .sort()
    : [];
  if (update) {
    for (const f of onDisk.filter((f) => !expected.includes(f))) fs.rmSync(path.join(goldenDir, f));
    return;
  }
  expect(onDisk).toEqual(expected);
});

for (const c of cases) {
  const file = `${c.v.name}.${c.family === 'ipv4' ? 'v4' : 'v6'}.rules`;
  test(`golden ${file}: matches the rendered plan, follows the NetnsRules contract, loads into the sim kernel`, () => {
    const p = path.join(goldenDir, file);
    if (update) {
      fs.mkdirSync(path.dirname(p), { recursive: true });
      fs.writeFileSync(p, c.text);
    }
    expect(fs.existsSync(p), `${p} is missing; run with UPDATE_GOLDEN=1 to write it`).toBe(true);
    const golden = fs.readFileSync(p, 'utf8');
    expect(c.text, `rendered text differs from ${p}; if the change is intended, run with UPDATE_GOLDEN=1`).toBe(golden);

    expect(() => parsePlanText(golden)).not.toThrow();

    const k = new SimKernel();
    k.addNetns('ns');
    if (c.v.name.endsWith('/hostprobe'))
      k.ipsetRestore('ns', renderIpsetRestore(buildHostProbeRules({ profile: 'upstream', ipv6: true }).ipsets));
    k.iptablesRestore('ns', c.family === 'ipv4' ? 4 : 6, golden, { source: file });
    expect(k.iptablesSave('ns', c.family === 'ipv4' ? 4 : 6)).toContain(':ISTIO_');
  });
}
