/**
 * The nftables model's parser against real nft (inside a private namespace): every document the
 * model refuses as invalid (tests/sim/kernel/nftables/error-cases.ts, `kernel: 'rejects'`) real
 * nft refuses too, changing nothing; the documents the model takes — upstream's golden files and
 * the model's own listings of them — real nft takes too, and nft's listing of them reads back
 * into the model as the same ruleset.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, expect } from '@playwright/test';
import { netnsLabWorld } from '../../worlds.js';
import { CommandError, execIn } from '../../../e2e/netns/ip.js';
import { NetnsRun } from '../../../e2e/netns/netns-run.js';
import { NfTables } from '../../../sim/kernel/nftables/nftables.js';
import { ERRORS } from '../../sim/kernel/nftables/error-cases.js';
import { ACCEPTED } from '../../sim/kernel/nftables/accepted-cases.js';

const world = netnsLabWorld();
test.skip(!world.available, world.reason);

const GOLDEN = path.resolve('fixtures/upstream-golden-nft');
const HOST_SETS =
  'add table inet istio-ambient-nat\nadd set inet istio-ambient-nat istio-inpod-probes-v4 { type ipv4_addr ; }\nadd set inet istio-ambient-nat istio-inpod-probes-v6 { type ipv6_addr ; }\n';

/** `nft -f -` in `ns`: 'accepted', or nft's error text when nft itself refused the document. */
async function nftApply(ns: string, doc: string): Promise<'accepted' | { refused: string }> {
  try {
    await execIn(ns, ['nft', '-f', '-'], doc.endsWith('\n') ? doc : `${doc}\n`);
    return 'accepted';
  } catch (e) {
    // Only nft's own refusal (exit 1 with its "Error:" report) is an outcome; anything else is a failure.
    if (e instanceof CommandError && e.code === 1 && /Error: /.test(e.stderr)) return { refused: e.stderr };
    throw e;
  }
}

test('what the model refuses as invalid, real nft refuses too, and nothing changes', async () => {
  const run = new NetnsRun();
  try {
    const ns = await run.create('nftparse');
    const accepted: string[] = [];
    const cases = ERRORS.filter((c) => c.kernel === 'rejects');
    expect(cases.length).toBeGreaterThan(20);
    for (const c of cases) {
      await execIn(ns, ['nft', 'flush', 'ruleset']);
      const r = await nftApply(ns, c.doc);
      if (r === 'accepted') accepted.push(c.name);
      else expect(await execIn(ns, ['nft', 'list', 'ruleset']), c.name).toBe('');
    }
    expect(accepted).toEqual([]);
  } finally {
    await run.dispose();
  }
});

test("real nft takes upstream's golden documents and the model's listings of them; nft's listings read back as the same", async () => {
  const run = new NetnsRun();
  try {
    const ns = await run.create('nftlist');
    for (const f of fs.readdirSync(GOLDEN).filter((x) => x.endsWith('.golden'))) {
      const doc = fs.readFileSync(path.join(GOLDEN, f), 'utf8');
      const model = new NfTables();
      if (f.startsWith('hostprobe')) model.apply(HOST_SETS);
      model.apply(doc, { source: f });
      await execIn(ns, ['nft', 'flush', 'ruleset']);
      if (f.startsWith('hostprobe')) expect(await nftApply(ns, HOST_SETS), f).toBe('accepted');
      expect(await nftApply(ns, doc), f).toBe('accepted');
      // the kernel's own listing reads back into the model as the same ruleset
      const kernelListing = await execIn(ns, ['nft', 'list', 'ruleset']);
      const fromKernel = new NfTables();
      fromKernel.apply(kernelListing, { source: `nft list ruleset after ${f}` });
      expect(fromKernel.list(), f).toBe(model.list());
      await execIn(ns, ['nft', 'flush', 'ruleset']);
      expect(await nftApply(ns, model.list()), `listing of ${f}`).toBe('accepted');
      // the kernel's tables are the model's
      const tables = (await execIn(ns, ['nft', 'list', 'tables'])).trim().split('\n').sort();
      expect(tables, f).toEqual(
        model
          .tables()
          .map((t) => `table ${t.family} ${t.name}`)
          .sort(),
      );
    }
  } finally {
    await run.dispose();
  }
});

test("every form the model takes real nft takes, and nft's listing of it reads back into the model as the same ruleset", async () => {
  const run = new NetnsRun();
  try {
    const ns = await run.create('nftforms');
    const refused: string[] = [];
    const unreadable: string[] = [];
    const differ: string[] = [];
    for (const c of ACCEPTED) {
      const model = new NfTables();
      model.apply(c.doc, { source: c.name });
      await execIn(ns, ['nft', 'flush', 'ruleset']);
      const r = await nftApply(ns, c.doc);
      if (r !== 'accepted') {
        refused.push(`${c.name}: ${r.refused}`);
        continue;
      }
      const listing = await execIn(ns, ['nft', 'list', 'ruleset']);
      const back = new NfTables();
      try {
        back.apply(listing, { source: `nft list ruleset (${c.name})` });
      } catch (e) {
        unreadable.push(`${c.name}: ${(e as Error).message}`);
        continue;
      }
      // nft's listing of the form means what the form means: the model lists both alike
      if (back.list() !== model.list())
        differ.push(`${c.name}:\n${back.list()}\n--- vs the model's ---\n${model.list()}`);
    }
    expect(refused).toEqual([]);
    expect(unreadable).toEqual([]);
    expect(differ).toEqual([]);
  } finally {
    await run.dispose();
  }
});
