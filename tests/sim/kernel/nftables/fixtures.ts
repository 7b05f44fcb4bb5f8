/** Helpers for the nftables model's tests: a context with a tproxy stub, and running a hook's chains. */
import type { Family } from '../../../../impl/api/ip/address.js';
import type { Hook, TableVerdict } from '../../../../sim/kernel/netfilter/types.js';
import type { NftEvalContext } from '../../../../sim/kernel/nftables/model.js';
import { NfTables } from '../../../../sim/kernel/nftables/nftables.js';
import { ctx as iptCtx, type CtxInit } from '../netfilter/fixtures.js';

export { packet } from '../netfilter/fixtures.js';

type TestCtx = ReturnType<typeof iptCtx> & NftEvalContext & { tproxied: { addr: string; port: number }[] };

export function nctx(init: CtxInit & { readonly tproxyOk?: boolean; readonly kernelSocket?: boolean }): TestCtx {
  const base = iptCtx(init);
  const tproxied: { addr: string; port: number }[] = [];
  return Object.assign(base, {
    ...(init.kernelSocket ? { socket: { kernelSocket: true as const } } : {}),
    tproxied,
    tproxyAssign(addr: { value: bigint } | undefined, port: number): boolean {
      tproxied.push({ addr: addr === undefined ? 'default' : String(addr.value), port });
      return init.tproxyOk ?? true;
    },
  }) as TestCtx;
}

export function load(text: string): NfTables {
  const n = new NfTables();
  n.apply(text, { source: 'test.nft' });
  return n;
}

/**
 * The filter/route chains of `hook` in the datapath's order, each to its verdict; stops at the
 * first verdict that is not accept (as the datapath does).
 */
export function runHook(
  n: NfTables,
  family: Family,
  hook: Hook,
  c: NftEvalContext,
): { chain: string; verdict: TableVerdict }[] {
  const out: { chain: string; verdict: TableVerdict }[] = [];
  const hc = n.chainsAt(family, hook);
  for (const ref of [...(hc?.chains ?? []), ...(hc?.nat ?? [])].sort((a, b) => a.priority - b.priority)) {
    const r = n.run(ref, c, true);
    out.push({ chain: ref.label, verdict: r.verdict });
    if (r.verdict.kind !== 'accept') break;
  }
  return out;
}

/** One filter chain at `hook` holding `rules`, in an inet table. */
export function chain(
  rules: readonly string[],
  hook = 'output',
  opts: { type?: string; family?: string; priority?: number | string } = {},
): string {
  return [
    `table ${opts.family ?? 'inet'} t {`,
    `  chain c {`,
    `    type ${opts.type ?? 'filter'} hook ${hook} priority ${opts.priority ?? 0}; policy accept;`,
    ...rules.map((r) => `    ${r}`),
    '  }',
    '}',
  ].join('\n');
}
