/**
 * Golden nftables files beside the iptables ones (fixtures/golden/<profile>/<variant>.nft): the
 * `nft -f` documents each profile's nftables backend writes for every in-pod variant and for the
 * node (`hostprobe.nft`: the sets document, then the rules document). `UPDATE_GOLDEN=1` rewrites
 * them. The upstream profile's documents are also held to istio-cni's own golden files
 * (nftables-upstream-golden.spec.ts); strict's are the IR translated rule for rule, and a test
 * here holds each strict rule to one nft rule (two for TPROXY) so none is lost in translation.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, expect } from '@playwright/test';
import { buildHostProbeRules } from '../../../../impl/node-agent/host-probe-rules.js';
import { buildInpodRules } from '../../../../impl/node-agent/rule-builder.js';
import { renderNft } from '../../../../impl/node-agent/nftables/nft-document.js';
import { hostProbeNftDocuments, inpodNftDocument } from '../../../../impl/node-agent/nftables/profile-nft.js';
import { rulesetTables } from '../../../../impl/node-agent/nftables/ruleset-to-nft.js';
import { isBuiltin } from '../../../../impl/node-agent/rule-ir.js';
import { INPOD_VARIANTS, inpodOptions, KUBELET_UID } from './variants.js';

const goldenDir = path.resolve(import.meta.dirname, '..', '..', '..', '..', 'fixtures', 'golden');
const update = process.env['UPDATE_GOLDEN'] === '1';

function cases(): { file: string; text: string }[] {
  const out: { file: string; text: string }[] = [];
  for (const profile of ['upstream', 'strict'] as const) {
    for (const [name, common] of Object.entries(INPOD_VARIANTS)) {
      const o = inpodOptions(profile, common);
      out.push({ file: `${profile}/inpod-${name}.nft`, text: renderNft(inpodNftDocument(o, buildInpodRules(o))) });
    }
    const ir =
      profile === 'strict'
        ? buildHostProbeRules({ profile, ipv6: true, kubeletUid: KUBELET_UID })
        : buildHostProbeRules({ profile, ipv6: true });
    const host = hostProbeNftDocuments(ir, { kubeletUid: KUBELET_UID });
    out.push({
      file: `${profile}/hostprobe.nft`,
      text: `# sets (own transaction)\n${renderNft(host.sets)}# rules\n${renderNft(host.rules)}`,
    });
  }
  return out;
}

test('every nftables variant has a golden file, and no stale ones remain', () => {
  const expected = cases()
    .map((c) => c.file)
    .sort();
  const onDisk = fs
    .readdirSync(goldenDir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.nft'))
    .map((f) => f.split(path.sep).join('/'))
    .sort();
  if (update) {
    for (const f of onDisk.filter((f) => !expected.includes(f))) fs.rmSync(path.join(goldenDir, f));
    return;
  }
  expect(onDisk).toEqual(expected);
});

for (const c of cases()) {
  test(`golden ${c.file}: matches the rendered document`, () => {
    const p = path.join(goldenDir, c.file);
    if (update) fs.writeFileSync(p, c.text);
    expect(fs.existsSync(p), `${p} is missing; run with UPDATE_GOLDEN=1 to write it`).toBe(true);
    expect(c.text, `rendered text differs from ${p}; if the change is intended, run with UPDATE_GOLDEN=1`).toBe(
      fs.readFileSync(p, 'utf8'),
    );
  });
}

test('strict: every IR rule is one nft rule in its table and chain (TPROXY two: tproxy, then drop)', () => {
  const ir = buildInpodRules(inpodOptions('strict', INPOD_VARIANTS['virtual-interfaces']));
  for (const rs of [ir.iptables.ipv4, ir.iptables.ipv6!]) {
    const tables = rulesetTables(rs, 'istio-ambient');
    const nftCount = tables.reduce((n, t) => n + t.rules.length, 0);
    const tproxies = rs.rules.filter((r) => r.target.kind === 'TPROXY').length;
    expect(tproxies).toBe(1);
    expect(nftCount).toBe(rs.rules.length + tproxies);
    for (const r of rs.rules.filter((r) => !isBuiltin(r.chain))) {
      const t = tables.find((t) => t.name === `istio-ambient-${r.table}`);
      expect(t?.family).toBe(rs.family === 'ipv4' ? 'ip' : 'ip6');
      expect(t?.rules.some((x) => x.chain === r.chain)).toBe(true);
    }
  }
});

test('strict: owner matches nftables cannot say are refused, not approximated', () => {
  const ir = buildInpodRules(inpodOptions('strict'));
  const rs = ir.iptables.ipv4;
  const bad = {
    ...rs,
    rules: rs.rules.map((r) =>
      r.id === 'filter/out/drop-spoofed-proxy-mark'
        ? { ...r, matches: [{ kind: 'owner' as const, uid: 1337, negUid: true }] }
        : r,
    ),
  };
  expect(() => rulesetTables(bad, 'istio-ambient')).toThrow(/socket-exists.*no nftables form/);
  const socketOnly = {
    ...rs,
    rules: rs.rules.map((r) =>
      r.id === 'filter/out/drop-spoofed-proxy-mark'
        ? { ...r, matches: [{ kind: 'owner' as const, socketExists: true }] }
        : r,
    ),
  };
  expect(() => rulesetTables(socketOnly, 'istio-ambient')).toThrow(/without a valid uid/);
});
