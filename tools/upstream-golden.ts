/**
 * Upstream golden-file comparison: istio-cni's own golden rule files (copied, with their source
 * commit, in fixtures/upstream-golden/) against this project's `upstream` profile, on the real
 * kernel. For each file: map upstream's test configuration to ours (node settings and the pod
 * annotations it stands for), render our rules, load upstream's rules and ours into two fresh
 * private network namespaces, and compare `iptables-save` / `ip6tables-save` after normalisation.
 *
 * Normalisation drops only what has no behaviour: comment lines, counters, tables left empty,
 * and the order in which chains are declared. The order of rules within every chain (hooks in
 * built-in chains included) is kept, so equal output means the kernel holds the same rules in
 * the same order. Nothing is fetched at run time.
 *
 * Safety: namespaces are created with a per-run `al-` prefix (e2e/netns/netns-run.ts) and
 * removed afterwards, also on failure; nothing runs in the root network namespace but
 * `ip netns add/del/list`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NetnsRun } from '../e2e/netns/netns-run.js';
import { run } from '../e2e/netns/ip.js';
import {
  BYPASS_INBOUND_CAPTURE,
  DNS_CAPTURE,
  REROUTE_VIRTUAL_INTERFACES,
  parsePodRedirectionAnnotations,
} from '../impl/api/annotations.js';
import type { IpFamily, RestoreText } from '../impl/host/netns-rules.js';
import { normaliseSave, parseSave } from '../impl/api/netns-rules-restore.js';
import { buildHostProbeRules, renderHostProbePlan, renderIpsetRestore } from '../impl/node-agent/host-probe-rules.js';
import { buildInpodPlan, inpodCommonOptions } from '../impl/node-agent/rule-builder.js';
import { cidr } from '../impl/node-agent/rule-ir.js';

/** One upstream golden file and the configuration of ours it corresponds to. */
export interface GoldenCase {
  readonly file: string;
  readonly kind: 'inpod' | 'hostprobe';
  /** Upstream's test case in its own terms (cni/pkg/iptables/common_test.go, iptables_test.go). */
  readonly upstream: string;
  /** Our node settings: IPv6 capture, DNS capture (global), probe SNAT addresses. */
  readonly ipv6: boolean;
  readonly dnsCapture: boolean;
  readonly probeSnat: Readonly<Record<IpFamily, string>>;
  /** The pod annotations upstream's pod-level overrides stand for. */
  readonly annotations: Readonly<Record<string, string>>;
}

/** upstream's constructTestConfig(): probe SNAT addresses of its in-pod tests. */
const INPOD_SNAT = { ipv4: '169.254.7.127', ipv6: 'e9ac:1e77:90ca:399f:4d6d:ece2:2f9b:3164' };
/** TestIptablesHostRules sets the defaults explicitly. */
const HOST_SNAT = { ipv4: '169.254.7.127', ipv6: 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff' };
const VIFS = { [REROUTE_VIRTUAL_INTERFACES]: 'fake1s0f0,fake1s0f1' };
const INGRESS = { [BYPASS_INBOUND_CAPTURE]: 'true' };

function inpodCases(): GoldenCase[] {
  // Upstream's AmbientConfig zero value has RedirectDNS false: only cases that set it have DNS on.
  const base: { name: string; upstream: string; dnsCapture: boolean; annotations: Record<string, string> }[] = [
    { name: 'default', upstream: 'RedirectDNS on, no pod overrides', dnsCapture: true, annotations: {} },
    { name: 'ingress', upstream: 'RedirectDNS off, IngressMode', dnsCapture: false, annotations: INGRESS },
    {
      name: 'virtual_interfaces',
      upstream: 'RedirectDNS off, VirtualInterfaces fake1s0f0, fake1s0f1',
      dnsCapture: false,
      annotations: VIFS,
    },
    {
      name: 'ingress_and_virtual_interfaces',
      upstream: 'RedirectDNS off, IngressMode and VirtualInterfaces',
      dnsCapture: false,
      annotations: { ...INGRESS, ...VIFS },
    },
    {
      name: 'dns_pod_enabled_and_off_globally',
      upstream: 'RedirectDNS off, pod DNSProxy enabled',
      dnsCapture: false,
      annotations: { [DNS_CAPTURE]: 'true' },
    },
    {
      name: 'dns_pod_disabled_and_on_globally',
      upstream: 'RedirectDNS on, pod DNSProxy disabled',
      dnsCapture: true,
      annotations: { [DNS_CAPTURE]: 'false' },
    },
  ];
  return base.flatMap((b) =>
    [false, true].map((ipv6): GoldenCase => ({
      file: `${b.name}${ipv6 ? '_ipv6' : ''}.golden`,
      kind: 'inpod',
      upstream: `${b.upstream}, EnableIPv6 ${ipv6}`,
      ipv6,
      dnsCapture: b.dnsCapture,
      probeSnat: INPOD_SNAT,
      annotations: b.annotations,
    })),
  );
}

/** Every upstream golden file we compare against. */
export const CASES: readonly GoldenCase[] = [
  ...inpodCases(),
  ...[false, true].map((ipv6): GoldenCase => ({
    file: `hostprobe${ipv6 ? '_ipv6' : ''}.golden`,
    kind: 'hostprobe',
    upstream: `host probe rules, EnableIPv6 ${ipv6}`,
    ipv6,
    dnsCapture: true,
    probeSnat: HOST_SNAT,
    annotations: {},
  })),
];

/**
 * Golden files whose configuration this project cannot express, with the reason. Listed, never
 * skipped silently: the sim test fails on a file that is in neither list. None today.
 */
export const NOT_EXPRESSIBLE: readonly { readonly file: string; readonly reason: string }[] = [];

/** fixtures/upstream-golden/ from the source tree or from dist/. */
export function goldenDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const d = path.join(dir, 'fixtures', 'upstream-golden');
    if (fs.existsSync(d)) return d;
    dir = path.dirname(dir);
  }
  throw new Error('cannot find fixtures/upstream-golden/ above tools/upstream-golden');
}

export function goldenFiles(): string[] {
  return fs
    .readdirSync(goldenDir())
    .filter((f) => f.endsWith('.golden'))
    .sort();
}

/**
 * Upstream's golden format to restore text, one per family: `* nat` → `*nat`, `-N X` →
 * `:X - [0:0]`; the recorded `iptables-save` / `ip6tables-save` commands are dropped. A table
 * name seen again in the same family starts the next family (IPv4 is always first).
 */
export function parseGolden(file: string, text: string): RestoreText[] {
  const families: string[][] = [[]];
  let seen = new Set<string>();
  let open: string | undefined;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    const where = `${file}:${i + 1}`;
    if (line === '' || line === 'iptables-save' || line === 'ip6tables-save') return;
    const cur = families[families.length - 1]!;
    const table = /^\*\s*(\w+)$/.exec(line)?.[1];
    if (table !== undefined) {
      if (open !== undefined) throw new Error(`${where}: table ${table} starts before ${open} was committed`);
      if (seen.has(table)) {
        families.push([]);
        seen = new Set();
      }
      seen.add(table);
      open = table;
      families[families.length - 1]!.push(`*${table}`);
      return;
    }
    if (open === undefined) throw new Error(`${where}: ${JSON.stringify(line)} outside a table block`);
    if (line === 'COMMIT') {
      cur.push('COMMIT');
      open = undefined;
    } else if (line.startsWith('-N ')) {
      cur.push(`:${line.slice(3).trim()} - [0:0]`);
    } else if (/^-[AI] /.test(line)) {
      cur.push(line);
    } else {
      throw new Error(`${where}: unexpected line ${JSON.stringify(line)} (expected * <table>, -N, -A, -I or COMMIT)`);
    }
  });
  if (open !== undefined) throw new Error(`${file}: table ${open} is not committed`);
  if (families.length > 2) throw new Error(`${file}: ${families.length} rule sets; expected IPv4 and at most IPv6`);
  return families.map((f) => f.join('\n') + '\n');
}

/** Our rules for a case: restore text per family, and the ipsets the rules need first. */
export function ourRules(c: GoldenCase): {
  readonly ipv4: RestoreText;
  readonly ipv6?: RestoreText;
  readonly ipsets?: string;
} {
  const probeSnat = { ipv4: cidr(c.probeSnat.ipv4), ipv6: cidr(c.probeSnat.ipv6) };
  if (c.kind === 'hostprobe') {
    const host = buildHostProbeRules({ profile: 'upstream', ipv6: c.ipv6, probeSnat });
    const t = renderHostProbePlan(host).iptables;
    if (t.ipv4 === undefined) throw new Error(`${c.file}: our host probe plan has no IPv4 rules`);
    return { ipv4: t.ipv4, ...(t.ipv6 !== undefined ? { ipv6: t.ipv6 } : {}), ipsets: renderIpsetRestore(host.ipsets) };
  }
  const pod = parsePodRedirectionAnnotations(c.annotations);
  const plan = buildInpodPlan({
    ...inpodCommonOptions(pod, { ipv6: c.ipv6, dnsCapture: c.dnsCapture, probeSnat }),
    profile: 'upstream',
  });
  const t = plan.iptables;
  if (t.ipv4 === undefined) throw new Error(`${c.file}: our in-pod plan has no IPv4 rules`);
  return { ipv4: t.ipv4, ...(t.ipv6 !== undefined ? { ipv6: t.ipv6 } : {}) };
}

/**
 * iptables-save output in a form where equal means same behaviour: normaliseSave (comments,
 * counters, empty tables), then per table the chain declarations sorted and each chain's rules
 * together, chains in name order, rules in their own order.
 */
export function normalise(save: string): string {
  const out: string[] = [];
  for (const t of [...parseSave(normaliseSave(save)).values()].sort((a, b) => a.table.localeCompare(b.table))) {
    out.push(`*${t.table}`);
    const decl = t.text
      .split('\n')
      .filter((l) => l.startsWith(':'))
      .sort();
    out.push(...decl);
    for (const chain of [...t.chains].sort()) out.push(...t.rules.filter((r) => r.split(/\s+/)[1] === chain));
    out.push('COMMIT');
  }
  return out.join('\n') + '\n';
}

interface SetResult {
  readonly file: string;
  readonly family: IpFamily;
  readonly upstream: string;
  readonly ours: string;
  /** Rules (-A lines) in the normalised upstream text: a comparison of nothing proves nothing. */
  readonly rules: number;
  readonly differences: readonly string[];
}

/** Line-level differences between two normalised saves (empty: identical). */
export function differences(upstream: string, ours: string): string[] {
  if (upstream === ours) return [];
  const u = upstream.split('\n');
  const o = ours.split('\n');
  const out = [
    ...u.filter((l) => !o.includes(l)).map((l) => `only upstream: ${l}`),
    ...o.filter((l) => !u.includes(l)).map((l) => `only ours:     ${l}`),
  ];
  return out.length > 0 ? out : ['the same lines in another order (rule order within a chain differs)'];
}

const TOOLS: Readonly<Record<IpFamily, { save: string; restore: string }>> = {
  ipv4: { save: 'iptables-save', restore: 'iptables-restore' },
  ipv6: { save: 'ip6tables-save', restore: 'ip6tables-restore' },
};

async function loadAndSave(
  netns: string,
  family: IpFamily,
  text: RestoreText,
  ipsets: string | undefined,
  what: string,
): Promise<string> {
  const exec = (argv: string[], input?: string): Promise<string> =>
    run(['ip', 'netns', 'exec', netns, ...argv], input).catch((e: unknown) => {
      throw new Error(`${what}: ${argv.join(' ')} in ${netns} failed: ${e instanceof Error ? e.message : String(e)}`);
    });
  if (ipsets !== undefined) await exec(['ipset', 'restore', '-exist'], ipsets);
  await exec([TOOLS[family].restore, '-w'], text);
  return exec([TOOLS[family].save]);
}

/**
 * Compare every case on the real kernel (root). Each rule set of each side goes into its own fresh
 * namespace (named with `prefix`, a fresh run prefix by default); a tool failing is an error
 * (thrown), never a difference or a pass.
 */
export async function compareAll(
  cases: readonly GoldenCase[] = CASES,
  log: (line: string) => void = () => undefined,
  prefix?: string,
): Promise<SetResult[]> {
  const out: SetResult[] = [];
  const netns = new NetnsRun(prefix);
  let failure: unknown;
  try {
    let n = 0;
    for (const c of cases) {
      const theirs = parseGolden(c.file, fs.readFileSync(path.join(goldenDir(), c.file), 'utf8'));
      const ours = ourRules(c);
      const families: IpFamily[] = c.ipv6 ? ['ipv4', 'ipv6'] : ['ipv4'];
      if (theirs.length !== families.length)
        throw new Error(`${c.file}: ${theirs.length} rule set(s) upstream, the mapping expects ${families.length}`);
      if (!c.ipv6 && ours.ipv6 !== undefined) throw new Error(`${c.file}: IPv6 is off but our plan has IPv6 rules`);
      for (const [i, family] of families.entries()) {
        const mine = ours[family];
        if (mine === undefined) throw new Error(`${c.file}: our plan has no ${family} rules`);
        const u = await netns.create(`g${n}u`);
        const o = await netns.create(`g${n}o`);
        n++;
        const upstream = normalise(
          await loadAndSave(u, family, theirs[i]!, ours.ipsets, `${c.file} upstream ${family}`),
        );
        const mineSaved = normalise(await loadAndSave(o, family, mine, ours.ipsets, `${c.file} ours ${family}`));
        await netns.remove(u);
        await netns.remove(o);
        const r: SetResult = {
          file: c.file,
          family,
          upstream,
          ours: mineSaved,
          rules: upstream.split('\n').filter((l) => l.startsWith('-A ')).length,
          differences: differences(upstream, mineSaved),
        };
        log(`${r.differences.length === 0 ? 'identical' : 'DIFFERENT'}  ${c.file} ${family} (${r.rules} rules)`);
        out.push(r);
      }
    }
  } catch (e) {
    failure = e;
  }
  try {
    await netns.dispose();
  } catch (e) {
    if (failure === undefined) failure = e;
  }
  if (failure !== undefined) throw failure;
  return out;
}
