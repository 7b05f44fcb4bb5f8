import { test, expect } from '@playwright/test';
import fc from 'fast-check';
import { Netfilter } from '../../../../sim/kernel/netfilter/netfilter.js';
import { ISTIO_INPOD_V4 } from './fixtures.js';

/** Rule fragments valid in nat OUTPUT/user chains reached only from OUTPUT. */
const addr = fc.constantFrom('10.244.0.0/16', '127.0.0.1', '192.0.2.7/32', '10.0.0.0/255.0.0.0', '169.254.7.127');
const port = fc.integer({ min: 0, max: 65535 });
const portSpec = fc.oneof(
  port.map(String),
  fc.tuple(port, port).map(([a, b]) => `${Math.min(a, b)}:${Math.max(a, b)}`),
);
const neg = fc.boolean().map((b) => (b ? '! ' : ''));
const markSpec = fc
  .tuple(fc.nat({ max: 0xffffffff }), fc.option(fc.nat({ max: 0xffffffff })))
  .map(([v, m]) => (m === null ? `0x${v.toString(16)}` : `${v}/${m}`));

const matchPart = fc.oneof(
  fc.tuple(neg, addr).map(([n, a]) => `${n}-s ${a}`),
  fc.tuple(neg, addr).map(([n, a]) => `${n}-d ${a}`),
  fc.tuple(neg, fc.constantFrom('lo', 'eth0', 'veth+')).map(([n, i]) => `${n}-o ${i}`),
  fc.tuple(neg, markSpec).map(([n, m]) => `-m mark ${n}--mark ${m}`),
  fc.tuple(neg, markSpec).map(([n, m]) => `-m connmark ${n}--mark ${m}`),
  fc
    .tuple(neg, fc.subarray(['NEW', 'ESTABLISHED', 'RELATED', 'INVALID', 'UNTRACKED', 'DNAT'], { minLength: 1 }))
    .map(([n, s]) => `-m conntrack ${n}--ctstate ${s.join(',')}`),
  fc.tuple(neg, fc.integer({ min: 0, max: 5000 })).map(([n, u]) => `-m owner ${n}--uid-owner ${u}`),
  fc.constantFrom(
    '-m owner --socket-exists',
    '-m addrtype --dst-type LOCAL',
    '-m comment --comment "a b"',
    '-m comment --comment plain',
  ),
);
const protoPart = fc.oneof(
  fc.constant(''),
  fc
    .tuple(fc.constantFrom('tcp', 'udp'), fc.option(fc.tuple(neg, portSpec)), fc.option(fc.tuple(neg, portSpec)))
    .map(([p, s, d]) => `-p ${p}${s ? ` ${s[0]}--sport ${s[1]}` : ''}${d ? ` ${d[0]}--dport ${d[1]}` : ''}`),
  fc
    .tuple(
      fc.constantFrom('tcp', 'udp'),
      fc.constantFrom('--dports', '--sports', '--ports'),
      fc.uniqueArray(port, { minLength: 1, maxLength: 5 }),
    )
    .map(([p, w, ps]) => `-p ${p} -m multiport ${w} ${ps.join(',')}`),
);
const target = (chains: readonly string[]) =>
  fc.oneof(
    fc.constantFrom(
      '-j ACCEPT',
      '-j DROP',
      '-j RETURN',
      '-j LOG --log-prefix "x y"',
      '-j MARK --set-mark 5',
      '-j MARK --and-mark 0xff',
      '-j CONNMARK --save-mark',
      '-j DNAT --to-destination 10.96.0.1',
      '',
    ),
    fc.constantFrom(...chains).map((c) => `-j ${c}`),
    fc.constantFrom(...chains).map((c) => `-g ${c}`),
  );
/** Chains C0..C3; a rule in Ci may only jump to Cj with j > i (no loops), OUTPUT may jump to any. */
const ruleset = fc
  .array(
    fc
      .tuple(fc.integer({ min: -1, max: 3 }), protoPart, fc.array(matchPart, { maxLength: 3 }))
      .chain(([ci, proto, ms]) => {
        const later = ['C0', 'C1', 'C2', 'C3'].slice(ci + 1);
        const tgt = later.length ? target(later) : fc.constantFrom('-j ACCEPT', '-j RETURN', '');
        return tgt.map((t) => `-A ${ci < 0 ? 'OUTPUT' : `C${ci}`} ${[proto, ...ms, t].filter(Boolean).join(' ')}`);
      }),
    { maxLength: 12 },
  )
  .map((rules) => `*nat\n:C0 - [0:0]\n:C1 - [0:0]\n:C2 - [0:0]\n:C3 - [0:0]\n${rules.join('\n')}\nCOMMIT\n`);

test('property: for generated rulesets, restore(save(x)) saves identically', () => {
  let loaded = 0;
  fc.assert(
    fc.property(ruleset, (text) => {
      const a = new Netfilter(4);
      try {
        a.restore(text);
      } catch (e) {
        // Generated text may be legitimately invalid (e.g. DNAT with --sport in a rule without -p is fine; a
        // --to-ports without -p is not). Only RestoreErrors are acceptable.
        expect((e as Error).name).toBe('RestoreError');
        return;
      }
      loaded++;
      const b = new Netfilter(4);
      b.restore(a.save());
      expect(b.save()).toBe(a.save());
      expect(b.rules().map((r) => r.text)).toEqual(a.rules().map((r) => r.text));
    }),
    { numRuns: 300, seed: 4242 },
  );
  expect(loaded).toBeGreaterThan(200);
});

test('mutation support: rules() lists stable identities and saveWithEdit removes or replaces exactly one rule', () => {
  const nf = new Netfilter(4);
  nf.restore(ISTIO_INPOD_V4, { source: 'inpod' });
  const infos = nf.rules();
  expect(new Set(infos.map((r) => r.id)).size).toBe(infos.length);
  const redirect = infos.find((r) => r.text.includes('--to-ports 15001'));
  // The line it was written on in the restore text (1-based).
  const line = ISTIO_INPOD_V4.split('\n').findIndex((l) => l.includes('--to-ports 15001')) + 1;
  expect(line).toBeGreaterThan(0);
  expect(redirect).toMatchObject({
    id: 'nat/ISTIO_OUTPUT/6',
    table: 'nat',
    chain: 'ISTIO_OUTPUT',
    position: 6,
    source: 'inpod',
    line,
  });
  for (const r of infos) {
    const removed = new Netfilter(4);
    removed.restore(nf.saveWithEdit({ table: r.table, chain: r.chain, position: r.position }));
    const texts = removed.rules().map((x) => x.text);
    expect(texts.length).toBe(infos.length - 1);
    expect(texts).toEqual(infos.filter((x) => x.id !== r.id).map((x) => x.text));
  }
  const weakened = new Netfilter(4);
  weakened.restore(
    nf.saveWithEdit({
      table: 'nat',
      chain: 'ISTIO_OUTPUT',
      position: 6,
      replacement: '! -d 127.0.0.1/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 15001',
    }),
  );
  expect(weakened.rules().find((r) => r.id === 'nat/ISTIO_OUTPUT/6')?.text).toBe(
    '-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 15001',
  );
});
