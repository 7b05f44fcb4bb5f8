/**
 * A small reference evaluator of L4 AuthorizationPolicies, independent of impl/ztunnel/authz, so
 * the authorization property can say what the destination proxy SHOULD have decided. It knows
 * only the fields below and answers 'unknown' for anything else, so an unsupported policy can
 * weaken the oracle but never make it lie.
 *
 * Semantics (istio.io authorization-policy reference): policies in the destination's namespace
 * or the root namespace, selected by matchLabels; any matching DENY denies; if some ALLOW policy
 * applies, at least one must match; an ALLOW policy without rules matches nothing.
 */
import type { PolicyObject } from '../world.js';

type OracleDecision = 'allow' | 'deny' | 'unknown';

interface OracleRequest {
  readonly dstNamespace: string;
  readonly dstLabels: Readonly<Record<string, string>>;
  readonly port: number;
  /** spiffe://td/ns/x/sa/y of the client, when it came over HBONE. */
  readonly srcIdentity: string | undefined;
  readonly rootNamespace?: string;
}

type Obj = Readonly<Record<string, unknown>>;
const isObj = (x: unknown): x is Obj => typeof x === 'object' && x !== null && !Array.isArray(x);
const strs = (x: unknown): string[] | undefined =>
  Array.isArray(x) && x.every((s) => typeof s === 'string') ? (x as string[]) : undefined;

function globMatch(pattern: string, value: string): boolean {
  if (pattern === '*') return true;
  if (pattern.startsWith('*')) return value.endsWith(pattern.slice(1));
  if (pattern.endsWith('*')) return value.startsWith(pattern.slice(0, -1));
  return pattern === value;
}

class Unknown extends Error {}

function principalOf(id: string | undefined): string | undefined {
  return id?.startsWith('spiffe://') ? id.slice('spiffe://'.length) : id;
}
function namespaceOf(id: string | undefined): string | undefined {
  return id ? /\/ns\/([^/]+)\//.exec(id)?.[1] : undefined;
}

function matchList(values: unknown, subject: string | undefined, neg: boolean): boolean {
  if (values === undefined) return true;
  const list = strs(values);
  if (!list) throw new Unknown();
  const hit = subject !== undefined && list.some((p) => globMatch(p, subject));
  if (neg) return subject !== undefined && !hit;
  return hit;
}

function matchSource(src: unknown, r: OracleRequest): boolean {
  if (!isObj(src)) throw new Unknown();
  for (const k of Object.keys(src))
    if (!['principals', 'notPrincipals', 'namespaces', 'notNamespaces'].includes(k)) throw new Unknown();
  const principal = principalOf(r.srcIdentity);
  const ns = namespaceOf(r.srcIdentity);
  return (
    matchList(src['principals'], principal, false) &&
    matchList(src['notPrincipals'], principal, true) &&
    matchList(src['namespaces'], ns, false) &&
    matchList(src['notNamespaces'], ns, true)
  );
}

function matchOperation(op: unknown, r: OracleRequest): boolean {
  if (!isObj(op)) throw new Unknown();
  for (const k of Object.keys(op)) if (!['ports', 'notPorts'].includes(k)) throw new Unknown();
  const port = String(r.port);
  const ports = op['ports'] === undefined ? undefined : strs(op['ports']);
  const notPorts = op['notPorts'] === undefined ? undefined : strs(op['notPorts']);
  if ((op['ports'] !== undefined && !ports) || (op['notPorts'] !== undefined && !notPorts)) throw new Unknown();
  return (!ports || ports.includes(port)) && (!notPorts || !notPorts.includes(port));
}

function matchRule(rule: unknown, r: OracleRequest): boolean {
  if (!isObj(rule)) throw new Unknown();
  for (const k of Object.keys(rule)) if (!['from', 'to'].includes(k)) throw new Unknown();
  const from = rule['from'];
  const to = rule['to'];
  if (from !== undefined) {
    if (!Array.isArray(from)) throw new Unknown();
    if (!from.some((f) => isObj(f) && matchSource(f['source'], r))) return false;
  }
  if (to !== undefined) {
    if (!Array.isArray(to)) throw new Unknown();
    if (!to.some((t) => isObj(t) && matchOperation(t['operation'], r))) return false;
  }
  return true;
}

export function referenceDecision(policies: readonly PolicyObject[], r: OracleRequest): OracleDecision {
  try {
    const root = r.rootNamespace ?? 'istio-system';
    let allowApplies = false;
    let allowed = false;
    let denied = false;
    for (const p of policies) {
      const meta = p['metadata'];
      const spec = p['spec'] ?? {};
      if (!isObj(meta) || !isObj(spec)) throw new Unknown();
      const ns = meta['namespace'];
      if (ns !== r.dstNamespace && ns !== root) continue;
      for (const k of Object.keys(spec)) if (!['selector', 'action', 'rules'].includes(k)) throw new Unknown();
      const sel = spec['selector'];
      if (sel !== undefined) {
        if (!isObj(sel) || !isObj(sel['matchLabels'])) throw new Unknown();
        const ml = sel['matchLabels'];
        if (!Object.entries(ml).every(([k, v]) => r.dstLabels[k] === v)) continue;
      }
      const action = spec['action'] ?? 'ALLOW';
      if (action !== 'ALLOW' && action !== 'DENY') throw new Unknown();
      const rules = spec['rules'];
      if (rules !== undefined && !Array.isArray(rules)) throw new Unknown();
      const matches = (rules ?? []).some((x: unknown) => matchRule(x, r));
      if (action === 'DENY') denied ||= matches;
      else {
        allowApplies = true;
        allowed ||= matches;
      }
    }
    if (denied) return 'deny';
    if (allowApplies && !allowed) return 'deny';
    return 'allow';
  } catch (e) {
    if (e instanceof Unknown) return 'unknown';
    throw e;
  }
}
