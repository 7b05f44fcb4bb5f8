/**
 * AuthorizationPolicy (security.istio.io/v1, wire JSON) → the L4 model the proxy enforces,
 * the way istiod translates it for ztunnel (istio/istio
 * pilot/pkg/serviceregistry/kube/controller/ambient/authorization.go), plus strict validation.
 *
 *   translatePolicy(obj, rootNamespace): Translation
 *     accepted — a valid policy; `warnings` name everything that was dropped (L7 fields);
 *     ignored  — not for this proxy: targetRef/targetRefs (waypoints enforce those), AUDIT and
 *                CUSTOM actions (ztunnel has only ALLOW and DENY). Upstream drops these too.
 *     invalid  — the object failed validation; `policy` is its fail-closed stand-in.
 *
 * Upstream translation (istiod, kept exactly):
 * - scope: no selector → NAMESPACE, or GLOBAL in the root namespace; a selector → selector scope;
 * - one L4Rule per spec.rules[i]: all `to` entries form one clause, all `from` entries one clause,
 *   each `when` condition its own clause of one Match; a rule with none of them has no clauses
 *   and matches every connection;
 * - strings: "*" presence, "*x" suffix, "x*" prefix, otherwise exact; "sa" in serviceAccounts
 *   means "<policy namespace>/sa";
 * - L7 attributes (hosts, methods, paths and their not-variants, remoteIpBlocks,
 *   requestPrincipals and their not-variants, any `when` key outside source.ip,
 *   source.namespace, source.principal, destination.ip, destination.port):
 *   ALLOW — the whole rule is dropped (a policy left with zero rules allows nothing);
 *   DENY  — the L7 parts are omitted, the L4 parts kept. A `to`/`from` entry or `when` condition
 *           made only of L7 becomes an empty Match, which makes its clause — and so the rule —
 *           never match: that DENY rule is a no-op (istio/istio#61126; enforcement unchanged
 *           upstream). A warning says so.
 *
 * Validation (ours; upstream relies on its admission webhook and otherwise silently skips values
 * it cannot parse — which could turn `ipBlocks: ["garbage"]` into "any source"): any unknown
 * field, wrong type, empty `from.source`/`to.operation`, condition without values, unparsable
 * IP/CIDR or port, misplaced `*`, malformed service account, `provider` on ALLOW/DENY, an unknown
 * action or a dry-run annotation other than "true"/"false" makes the policy invalid. An invalid
 * policy is never dropped (dropping an ALLOW or DENY can widen access); it is replaced by its
 * fail-closed form in the scope it would have had (the namespace, or the whole mesh when its
 * selector is unreadable or it sits in the root namespace):
 *   ALLOW                  → an ALLOW with zero rules: it allows nothing, and its presence puts
 *                            the scope into default-deny (what upstream does to an ALLOW whose
 *                            rules are all L7, "drop all traffic as a defensive move");
 *   DENY or unknown action → a DENY with one rule without clauses: it denies every connection.
 */
import type { AuthorizationPolicy } from '../../host/kube.js';
import { familyBits, tryParseIpUnmapped } from '../../api/ip/address.js';
import { parsePrefixLength, prefixOf } from '../../api/ip/prefix.js';
import {
  EMPTY_MATCH,
  isEmptyMatch,
  policyKey,
  type Cidr,
  type Clause,
  type L4Policy,
  type L4Rule,
  type Match,
  type PolicyAction,
  type PolicyScope,
  type ServiceAccountMatch,
  type StringMatch,
} from './policy.js';

const DRY_RUN_ANNOTATION = 'istio.io/dry-run';
export const DEFAULT_ROOT_NAMESPACE = 'istio-system';

export type Translation =
  | { readonly outcome: 'accepted'; readonly policy: L4Policy; readonly warnings: readonly string[] }
  | { readonly outcome: 'ignored'; readonly key: string; readonly reason: string }
  | { readonly outcome: 'invalid'; readonly policy: L4Policy; readonly errors: readonly string[] };

const SPEC_KEYS = new Set(['action', 'rules', 'selector', 'provider', 'targetRef', 'targetRefs']);
const RULE_KEYS = new Set(['from', 'to', 'when']);
const SOURCE_L4 = [
  'principals',
  'notPrincipals',
  'namespaces',
  'notNamespaces',
  'ipBlocks',
  'notIpBlocks',
  'serviceAccounts',
  'notServiceAccounts',
] as const;
const SOURCE_L7 = ['requestPrincipals', 'notRequestPrincipals', 'remoteIpBlocks', 'notRemoteIpBlocks'] as const;
const OPERATION_L4 = ['ports', 'notPorts'] as const;
const OPERATION_L7 = ['hosts', 'notHosts', 'methods', 'notMethods', 'paths', 'notPaths'] as const;

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Collects errors with their field path; parsers return a best-effort value regardless. */
class Problems {
  readonly errors: string[] = [];
  add(path: string, msg: string): void {
    this.errors.push(`${path}: ${msg}`);
  }
  unknownKeys(path: string, obj: Json, allowed: ReadonlySet<string>): void {
    for (const k of Object.keys(obj)) if (!allowed.has(k)) this.add(`${path}.${k}`, 'unknown field');
  }
}

const show = (v: unknown): string => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? `${s.slice(0, 80)}…` : s;
};

function stringList(p: Problems, path: string, v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) {
    p.add(path, `expected a list of strings, got ${show(v)}`);
    return [];
  }
  const out: string[] = [];
  v.forEach((x, i) => {
    if (typeof x !== 'string' || x === '') p.add(`${path}[${i}]`, `expected a non-empty string, got ${show(x)}`);
    else out.push(x);
  });
  return out;
}

function stringMatch(p: Problems, path: string, v: string): StringMatch {
  if (v === '*') return { kind: 'presence' };
  const stars = v.split('*').length - 1;
  if (stars === 1 && v.startsWith('*')) return { kind: 'suffix', value: v.slice(1) };
  if (stars === 1 && v.endsWith('*')) return { kind: 'prefix', value: v.slice(0, -1) };
  if (stars > 0) p.add(path, `${show(v)}: "*" is allowed only alone, or once at the start or end`);
  return { kind: 'exact', value: v };
}

function stringMatches(p: Problems, path: string, v: unknown): StringMatch[] {
  return stringList(p, path, v).map((s, i) => stringMatch(p, `${path}[${i}]`, s));
}

/**
 * A policy IP block: an address (a host block) or `addr/len`, the length in decimal without
 * leading zeros, host bits cleared (a netip.Prefix containment check ignores them). An
 * IPv4-mapped address counts as its IPv4 address, as the peers it is matched against do
 * (match.ts); written dotted (::ffff:a.b.c.d) with a length it is refused, since the length
 * would have to be shifted and policies never need that.
 */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const addrText = slash < 0 ? text : text.slice(0, slash);
  if (slash >= 0 && addrText.toLowerCase().startsWith('::ffff:') && addrText.includes('.')) return undefined;
  const ip = tryParseIpUnmapped(addrText);
  if (!ip) return undefined;
  const len = slash < 0 ? familyBits(ip.family) : parsePrefixLength(text.slice(slash + 1), ip.family, true);
  return len === undefined ? undefined : { prefix: prefixOf(ip, len), text };
}

function cidrs(p: Problems, path: string, v: unknown): Cidr[] {
  const out: Cidr[] = [];
  stringList(p, path, v).forEach((s, i) => {
    const c = parseCidr(s);
    if (c) out.push(c);
    else p.add(`${path}[${i}]`, `${show(s)} is not an IP address or CIDR block (e.g. "10.0.0.0/8", "fd00::1")`);
  });
  return out;
}

function ports(p: Problems, path: string, v: unknown): number[] {
  const out: number[] = [];
  stringList(p, path, v).forEach((s, i) => {
    if (/^[0-9]{1,5}$/.test(s) && Number(s) <= 65535) out.push(Number(s));
    else p.add(`${path}[${i}]`, `${show(s)} is not a port number (0-65535, decimal)`);
  });
  return out;
}

function serviceAccounts(p: Problems, path: string, v: unknown, policyNamespace: string): ServiceAccountMatch[] {
  const out: ServiceAccountMatch[] = [];
  stringList(p, path, v).forEach((s, i) => {
    const parts = s.split('/');
    const ok = parts.length <= 2 && parts.every((x) => x !== '') && !s.includes('*');
    if (!ok) {
      p.add(
        `${path}[${i}]`,
        `${show(s)} is not a service account: expected "name" or "namespace/name", without wildcards`,
      );
      return;
    }
    out.push(
      parts.length === 2
        ? { namespace: parts[0]!, serviceAccount: parts[1]! }
        : { namespace: policyNamespace, serviceAccount: s },
    );
  });
  return out;
}

interface RuleOutcome {
  readonly clauses: Clause[];
  /** L7 attribute names found in this rule. */
  readonly l7: string[];
}

function translateRule(p: Problems, path: string, rule: unknown, policyNamespace: string): RuleOutcome {
  const l7: string[] = [];
  const clauses: Clause[] = [];
  if (!isObject(rule)) {
    p.add(path, `expected an object with from/to/when, got ${show(rule)}`);
    return { clauses, l7 };
  }
  p.unknownKeys(path, rule, RULE_KEYS);

  const entries = (key: 'from' | 'to'): unknown[] => {
    const v = rule[key];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) {
      p.add(`${path}.${key}`, `expected a list, got ${show(v)}`);
      return [];
    }
    return v;
  };

  const toMatches: Match[] = [];
  entries('to').forEach((entry, i) => {
    const ep = `${path}.to[${i}]`;
    if (!isObject(entry)) return p.add(ep, `expected {operation: {...}}, got ${show(entry)}`);
    p.unknownKeys(ep, entry, new Set(['operation']));
    const op = entry['operation'];
    if (!isObject(op)) return p.add(`${ep}.operation`, 'required: an operation with at least one field');
    const opPath = `${ep}.operation`;
    p.unknownKeys(opPath, op, new Set([...OPERATION_L4, ...OPERATION_L7]));
    let set = 0;
    for (const k of OPERATION_L7) {
      if (stringList(p, `${opPath}.${k}`, op[k]).length > 0) {
        l7.push(k);
        set++;
      }
    }
    const m: Match = {
      ...EMPTY_MATCH,
      destinationPorts: ports(p, `${opPath}.ports`, op['ports']),
      notDestinationPorts: ports(p, `${opPath}.notPorts`, op['notPorts']),
    };
    if (!isEmptyMatch(m)) set++;
    if (set === 0) p.add(opPath, 'must set at least one field (an empty operation matches nothing upstream)');
    toMatches.push(m);
  });

  const fromMatches: Match[] = [];
  entries('from').forEach((entry, i) => {
    const ep = `${path}.from[${i}]`;
    if (!isObject(entry)) return p.add(ep, `expected {source: {...}}, got ${show(entry)}`);
    p.unknownKeys(ep, entry, new Set(['source']));
    const src = entry['source'];
    if (!isObject(src)) return p.add(`${ep}.source`, 'required: a source with at least one field');
    const sp = `${ep}.source`;
    p.unknownKeys(sp, src, new Set([...SOURCE_L4, ...SOURCE_L7]));
    let set = 0;
    for (const k of SOURCE_L7) {
      if (stringList(p, `${sp}.${k}`, src[k]).length > 0) {
        l7.push(k);
        set++;
      }
    }
    const m: Match = {
      ...EMPTY_MATCH,
      sourceIps: cidrs(p, `${sp}.ipBlocks`, src['ipBlocks']),
      notSourceIps: cidrs(p, `${sp}.notIpBlocks`, src['notIpBlocks']),
      namespaces: stringMatches(p, `${sp}.namespaces`, src['namespaces']),
      notNamespaces: stringMatches(p, `${sp}.notNamespaces`, src['notNamespaces']),
      serviceAccounts: serviceAccounts(p, `${sp}.serviceAccounts`, src['serviceAccounts'], policyNamespace),
      notServiceAccounts: serviceAccounts(p, `${sp}.notServiceAccounts`, src['notServiceAccounts'], policyNamespace),
      principals: stringMatches(p, `${sp}.principals`, src['principals']),
      notPrincipals: stringMatches(p, `${sp}.notPrincipals`, src['notPrincipals']),
    };
    if (!isEmptyMatch(m)) set++;
    if (set === 0) p.add(sp, 'must set at least one field (an empty source matches nothing upstream)');
    fromMatches.push(m);
  });

  if (toMatches.length > 0) clauses.push(toMatches);
  if (fromMatches.length > 0) clauses.push(fromMatches);

  const when = rule['when'];
  if (when !== undefined && when !== null && !Array.isArray(when))
    p.add(`${path}.when`, `expected a list, got ${show(when)}`);
  (Array.isArray(when) ? when : []).forEach((cond: unknown, i: number) => {
    const cp = `${path}.when[${i}]`;
    if (!isObject(cond)) return p.add(cp, `expected {key, values, notValues}, got ${show(cond)}`);
    p.unknownKeys(cp, cond, new Set(['key', 'values', 'notValues']));
    const key = cond['key'];
    if (typeof key !== 'string' || key === '') return p.add(`${cp}.key`, 'required: a non-empty attribute name');
    const values = stringList(p, `${cp}.values`, cond['values']);
    const notValues = stringList(p, `${cp}.notValues`, cond['notValues']);
    if (values.length === 0 && notValues.length === 0) p.add(cp, 'must set values or notValues');
    let m: Match = EMPTY_MATCH;
    const vp = `${cp}.values`;
    const np = `${cp}.notValues`;
    switch (key) {
      case 'source.ip':
        m = { ...m, sourceIps: cidrs(p, vp, values), notSourceIps: cidrs(p, np, notValues) };
        break;
      case 'destination.ip':
        m = { ...m, destinationIps: cidrs(p, vp, values), notDestinationIps: cidrs(p, np, notValues) };
        break;
      case 'destination.port':
        m = { ...m, destinationPorts: ports(p, vp, values), notDestinationPorts: ports(p, np, notValues) };
        break;
      case 'source.namespace':
        m = { ...m, namespaces: stringMatches(p, vp, values), notNamespaces: stringMatches(p, np, notValues) };
        break;
      case 'source.principal':
        m = { ...m, principals: stringMatches(p, vp, values), notPrincipals: stringMatches(p, np, notValues) };
        break;
      default:
        l7.push(`when ${key}`); // unsupported key: an empty Match, as upstream
    }
    clauses.push([m]);
  });
  return { clauses, l7 };
}

function scopeOf(p: Problems, spec: Json, namespace: string, rootNamespace: string): PolicyScope {
  const sel = spec['selector'];
  const unscoped: PolicyScope = namespace === rootNamespace ? { kind: 'global' } : { kind: 'namespace' };
  if (sel === undefined || sel === null) return unscoped;
  if (!isObject(sel)) {
    p.add('spec.selector', `expected {matchLabels: {...}}, got ${show(sel)}`);
    return unscoped;
  }
  p.unknownKeys('spec.selector', sel, new Set(['matchLabels']));
  const ml = sel['matchLabels'] ?? {};
  if (!isObject(ml)) {
    p.add('spec.selector.matchLabels', `expected a map of label names to values, got ${show(ml)}`);
    return unscoped;
  }
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(ml)) {
    if (typeof v !== 'string') p.add(`spec.selector.matchLabels.${k}`, `expected a string, got ${show(v)}`);
    else labels[k] = v;
  }
  return { kind: 'selector', matchLabels: labels };
}

export function translatePolicy(
  obj: AuthorizationPolicy | unknown,
  rootNamespace: string = DEFAULT_ROOT_NAMESPACE,
): Translation {
  const p = new Problems();
  const o: Json = isObject(obj) ? obj : {};
  if (!isObject(obj)) p.add('<root>', `expected an AuthorizationPolicy object, got ${show(obj)}`);
  const meta = isObject(o['metadata']) ? o['metadata'] : {};
  const rawNs = meta['namespace'];
  const rawName = meta['name'];
  const nsKnown = typeof rawNs === 'string' && rawNs !== '';
  if (!nsKnown) p.add('metadata.namespace', 'required');
  if (typeof rawName !== 'string' || rawName === '') p.add('metadata.name', 'required');
  const namespace = nsKnown ? rawNs : '';
  const name = typeof rawName === 'string' && rawName !== '' ? rawName : '<unnamed>';
  const key = policyKey(namespace, name);

  const annotations = isObject(meta['annotations']) ? meta['annotations'] : {};
  const dryRunRaw = annotations[DRY_RUN_ANNOTATION];
  let dryRun = false;
  if (dryRunRaw === 'true') dryRun = true;
  else if (dryRunRaw !== undefined && dryRunRaw !== 'false') {
    p.add(`metadata.annotations["${DRY_RUN_ANNOTATION}"]`, `${show(dryRunRaw)}: expected exactly "true" or "false"`);
  }

  const specRaw = o['spec'] ?? {};
  const spec: Json = isObject(specRaw) ? specRaw : {};
  if (!isObject(specRaw)) p.add('spec', `expected an object, got ${show(specRaw)}`);

  const targetRefs = spec['targetRefs'];
  if (
    (spec['targetRef'] !== undefined && spec['targetRef'] !== null) ||
    (Array.isArray(targetRefs) && targetRefs.length > 0)
  ) {
    return {
      outcome: 'ignored',
      key,
      reason: 'the policy has targetRef/targetRefs: waypoints enforce it, not the node proxy',
    };
  }
  const rawAction = spec['action'] ?? 'ALLOW';
  if (rawAction === 'AUDIT' || rawAction === 'CUSTOM') {
    return { outcome: 'ignored', key, reason: `ztunnel does not support the ${rawAction} action` };
  }

  p.unknownKeys('spec', spec, SPEC_KEYS);
  let action: PolicyAction = 'DENY';
  if (rawAction === 'ALLOW' || rawAction === 'DENY') action = rawAction;
  else p.add('spec.action', `${show(rawAction)}: expected ALLOW, DENY, AUDIT or CUSTOM`);
  if (spec['provider'] !== undefined && spec['provider'] !== null)
    p.add('spec.provider', 'only allowed with action CUSTOM');
  if (spec['targetRefs'] !== undefined && spec['targetRefs'] !== null && !Array.isArray(spec['targetRefs'])) {
    p.add('spec.targetRefs', `expected a list, got ${show(spec['targetRefs'])}`);
  }

  const scope = nsKnown ? scopeOf(p, spec, namespace, rootNamespace) : { kind: 'global' as const };

  const rulesRaw = spec['rules'];
  if (rulesRaw !== undefined && rulesRaw !== null && !Array.isArray(rulesRaw))
    p.add('spec.rules', `expected a list, got ${show(rulesRaw)}`);
  const rules: L4Rule[] = [];
  const warnings: string[] = [];
  (Array.isArray(rulesRaw) ? rulesRaw : []).forEach((r: unknown, i: number) => {
    const { clauses, l7 } = translateRule(p, `spec.rules[${i}]`, r, namespace);
    if (l7.length === 0) {
      rules.push({ index: i, clauses });
      return;
    }
    const found = [...new Set(l7)].join(', ');
    if (action === 'ALLOW') {
      warnings.push(
        `rules[${i}] dropped: ztunnel does not support HTTP attributes (${found}); an ALLOW rule with them never matches`,
      );
      return;
    }
    const dead = clauses.some((c) => c.length > 0 && c.every(isEmptyMatch));
    warnings.push(
      dead
        ? `rules[${i}]: HTTP attributes (${found}) omitted; a from/to/when part had only HTTP attributes, so this DENY rule has no enforceable L4 conditions and never matches (istio/istio#61126)`
        : `rules[${i}]: HTTP attributes (${found}) omitted; the DENY rule is enforced on its L4 conditions only (more restrictive than requested)`,
    );
    rules.push({ index: i, clauses });
  });

  if (p.errors.length > 0) {
    const failClosed: L4Policy = {
      namespace,
      name,
      key,
      scope,
      action,
      rules: action === 'ALLOW' ? [] : [{ index: -1, clauses: [] }],
      dryRun,
      origin: 'invalid',
    };
    return { outcome: 'invalid', policy: failClosed, errors: p.errors };
  }
  return {
    outcome: 'accepted',
    policy: { namespace, name, key, scope, action, rules, dryRun, origin: 'policy' },
    warnings,
  };
}
