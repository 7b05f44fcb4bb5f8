/**
 * Hand-made mutants of the implementation (impl/) and of the simulator (sim/) that `check` must
 * catch: each is one exact text replacement in one compiled file of dist/. `npm run mutate:impl`
 * (tools/mutate-impl.ts) applies them one at a time to a private copy of dist/ and runs
 * `check` on the copy, so the mutant runs through the real code paths while the shipped code
 * knows nothing about mutants (impl/ has no switch for them).
 *
 * Why compiled text and not source: tsc's output is what runs; a copy of dist/ needs no
 * rebuild per mutant (seconds instead of a minute), and the anchors are checked against the
 * current build by tests/sim/mutation/impl-mutants.spec.ts, so a refactor that moves an anchor
 * fails loudly there instead of silently testing nothing.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ImplMutant {
  /** Stable name (the runner's --mutants filter and the README table use it). */
  readonly name: string;
  /** What part of the system it breaks (the list: authz, enrollment, plugin, ...). */
  readonly area: string;
  /** What the mutant does, in words. */
  readonly doc: string;
  /** File relative to dist/ (compiled JavaScript). */
  readonly file: string;
  /** Text that must occur exactly once in the file. */
  readonly anchor: string;
  readonly replacement: string;
}

export const IMPL_MUTANTS: readonly ImplMutant[] = [
  {
    name: 'authz-allow-before-deny',
    area: 'authorization engine',
    doc: 'an enforced ALLOW that matches wins before any DENY is looked at (ztunnel evaluates DENY first)',
    file: 'impl/ztunnel/authz/engine.js',
    anchor: 'for (const p of denies.filter((x) => !x.dryRun)) {',
    replacement:
      "for (const p of allows.filter((x) => !x.dryRun)) { if (matchingRule(p, facts)) return this.done(req, { allow: true, reason: 'mutant: allow first', dryRun }); }\n        for (const p of denies.filter((x) => !x.dryRun)) {",
  },
  {
    name: 'authz-deny-ignored',
    area: 'authorization engine',
    doc: 'a matching enforced DENY policy does not deny',
    file: 'impl/ztunnel/authz/engine.js',
    anchor: 'if (r)\n                return this.done(req, { allow: false, reason: `explicitly denied by:',
    replacement:
      'if (r && false)\n                return this.done(req, { allow: false, reason: `explicitly denied by:',
  },
  {
    name: 'enrollment-pod-label-ignored',
    area: 'enrollment',
    doc: 'the first enablement selector (pod label istio.io/dataplane-mode=ambient) is skipped: such a pod in a namespace without the label is never enrolled',
    file: 'impl/api/enrollment.js',
    anchor: 'for (const [i, s] of config.selectors.entries()) {',
    replacement: 'for (const [i, s] of config.selectors.slice(1).entries()) {',
  },
  {
    name: 'plugin-ok-false-succeeds',
    area: 'CNI plugin fail-closed path',
    doc: 'the plugin reports success when the node agent answers ok:false',
    file: 'impl/cni-plugin/cni-plugin.js',
    anchor: 'if (!reply.ok)\n',
    replacement: 'if (!reply.ok && false)\n',
  },
  {
    name: 'plugin-unreachable-succeeds',
    area: 'CNI plugin fail-closed path',
    doc: 'the plugin reports success when it cannot reach the node agent at all',
    file: 'impl/cni-plugin/cni-plugin.js',
    anchor:
      'fail(CniErrorCode.TryAgainLater, `${PLUGIN_TYPE}: cannot reach the node agent at ${config.agentSocket}`, why);',
    replacement: 'return;',
  },
  {
    name: 'ca-skips-node-check',
    area: 'mesh CA node authorization',
    doc: "the mesh CA grants a node proxy any identity of the mesh, not only those of its node's pods",
    file: 'impl/mesh-ca/node-authorizer.js',
    anchor: 'if (!there)\n        return { ok: false, reason: `no pod of',
    replacement: 'if (!there && false)\n        return { ok: false, reason: `no pod of',
  },
  {
    name: 'zds-any-peer-uid',
    area: 'ZDS peer check',
    doc: 'the node agent accepts a ZDS client of any uid as its node proxy',
    file: 'impl/node-agent/zds-server.js',
    anchor: 'if (!peer || !this.opts.allowedUids.includes(peer.uid)) {',
    replacement: 'if (!peer) {',
  },
  {
    name: 'repair-never-repairs-rules',
    area: 'repair',
    doc: 'the repair loop never notices in-pod rules that drifted (flushed, edited)',
    file: 'impl/node-agent/node-agent.js',
    anchor: 'if (diff.length > 0) {',
    replacement: 'if (false) {',
  },
  {
    name: 'strict-foreign-rules-ignored',
    area: 'repair',
    doc: "strict neither looks for foreign rules in its plan's tables nor replaces them whole: it checks and applies as upstream (an inserted ACCEPT ahead of the hook stays)",
    file: 'impl/node-agent/node-agent.js',
    anchor: "return this.config.profile === 'strict';",
    replacement: 'return false;',
  },
  {
    name: 'strict-escaped-flows-kept',
    area: 'repair',
    doc: 'after a drift repair strict finds the connections that escaped capture while the rules were drifted but ends none (conntrack keeps them un-NATed, so they stay uncaptured)',
    file: 'impl/node-agent/node-agent.js',
    anchor: 'await this.deps.flows.end(netns, ended.map((e) => e.flow));',
    replacement: 'ended = [];',
  },
  {
    name: 'strict-plaintext-to-pending',
    area: 'outbound protocol choice',
    doc: "strict's source proxy downgrades to plaintext for a destination pending enrollment, as upstream (no fail closed until the destination is served)",
    file: 'impl/ztunnel/outbound.js',
    anchor: "if (!hbone && dstWl?.pending === true && deps.profile === 'strict')",
    replacement: 'if (false)',
  },
  {
    name: 'inbound-authz-skipped',
    area: 'inbound authorization',
    doc: 'the destination proxy forwards inbound connections without asking the authorizer',
    file: 'impl/ztunnel/inbound.js',
    anchor: 'const decision = deps.authorizer.evaluate(req);',
    replacement: "const decision = { allow: true, reason: 'mutant: not evaluated', dryRun: [] };",
  },
  {
    name: 'outbound-original-dst-ignored',
    area: 'original destination',
    doc: 'the outbound proxy ignores SO_ORIGINAL_DST and uses the address the client hit (its own 15001)',
    file: 'impl/ztunnel/outbound.js',
    anchor: 'const dst = canonical(down.originalDst() ?? down.localAddress);',
    replacement: 'const dst = canonical(down.localAddress);',
  },
  {
    name: 'inbound-original-dst-wrong',
    area: 'original destination',
    doc: "the inbound plaintext proxy takes the original destination's address but the port the client hit (15006) — the wrong SO_ORIGINAL_DST",
    file: 'impl/ztunnel/inbound.js',
    anchor: 'const target = canonical(down.originalDst() ?? down.localAddress);',
    replacement:
      'const target = canonical({ ...(down.originalDst() ?? down.localAddress), port: down.localAddress.port });',
  },
  {
    name: 'sim-nat-per-packet',
    area: 'sim: NAT once',
    doc: 'the simulated kernel runs the nat table for every packet of the original direction, not only the first',
    file: 'sim/kernel/datapath.js',
    anchor: "if (!decided && ct.direction === 'original') {",
    replacement: "if (ct.direction === 'original') {",
  },
  {
    name: 'sim-redirect-keeps-port',
    area: 'sim: REDIRECT',
    doc: 'REDIRECT ignores --to-ports and keeps the destination port (the connection reaches the original port)',
    file: 'sim/kernel/datapath.js',
    anchor: 'const port = pickPort(a.ports, p.dport);',
    replacement: "const port = a.kind === 'redirect' ? p.dport : pickPort(a.ports, p.dport);",
  },
  {
    name: 'sim-so-mark-unchecked',
    area: 'sim: SO_MARK permission',
    doc: 'setsockopt(SO_MARK) succeeds without CAP_NET_ADMIN (or CAP_NET_RAW from 5.17)',
    file: 'sim/kernel/kernel.js',
    anchor: 'if (!maySetMark(s.owner, this.version)) {',
    replacement: 'if (false) {',
  },
  {
    name: 'sim-watch-drops-namespace-update',
    area: 'sim: watch events',
    doc: 'the API server never delivers a MODIFIED event of a Namespace to its watches (a dropped event; a relist still sees the change)',
    file: 'sim/kube/store.js',
    anchor: "if (before && now)\n                this.enqueue(w, { type: 'MODIFIED', object: ev.object });",
    replacement:
      "if (before && now) {\n                if (ev.kind !== 'Namespace') this.enqueue(w, { type: 'MODIFIED', object: ev.object }); }",
  },
];

export class MutantAnchorError extends Error {
  constructor(
    readonly mutant: string,
    readonly file: string,
    readonly count: number,
  ) {
    super(
      `mutant ${mutant}: its anchor occurs ${count} time(s) in ${file}, not exactly once; the compiled code changed — update the anchor in scenarios/mutation/impl-mutants.ts (and rebuild with npm run build)`,
    );
    this.name = 'MutantAnchorError';
  }
}

function occurrences(text: string, anchor: string): number {
  let n = 0;
  for (let i = text.indexOf(anchor); i >= 0; i = text.indexOf(anchor, i + anchor.length)) n++;
  return n;
}

/** How often the mutant's anchor occurs in `distRoot` (must be 1 for the mutant to apply). */
export function anchorCount(distRoot: string, m: ImplMutant): number {
  const path = join(distRoot, m.file);
  if (!existsSync(path)) return 0;
  return occurrences(readFileSync(path, 'utf8'), m.anchor);
}

/** Apply `m` in place under `distRoot` (a private copy!). Throws MutantAnchorError unless the anchor occurs exactly once. */
export function applyImplMutant(distRoot: string, m: ImplMutant): void {
  const path = join(distRoot, m.file);
  if (!existsSync(path)) throw new MutantAnchorError(m.name, path, 0);
  const text = readFileSync(path, 'utf8');
  const count = occurrences(text, m.anchor);
  if (count !== 1) throw new MutantAnchorError(m.name, path, count);
  writeFileSync(
    path,
    text.replace(m.anchor, () => m.replacement),
  );
}

interface MutantTree {
  /** Root of the copy: holds dist/, package.json and links to node_modules/ and build/. */
  readonly root: string;
  /** The copy's CLI entry point. */
  readonly cli: string;
  remove(): void;
}

/**
 * A private copy of the repository's compiled tree with `m` applied (undefined: unmutated):
 * dist/ copied, package.json copied (it makes the .js files ES modules), node_modules/ and
 * build/ (native addons) linked. The original tree is never written.
 */
export function prepareMutantTree(repoRoot: string, m: ImplMutant | undefined, parent = tmpdir()): MutantTree {
  const dist = join(repoRoot, 'dist');
  if (!existsSync(join(dist, 'cli', 'main.js')))
    throw new Error(`${dist}/cli/main.js is missing: build first (npm run build)`);
  const root = mkdtempSync(join(parent, `ambient-lab-mutant-${m?.name ?? 'none'}-`));
  try {
    cpSync(dist, join(root, 'dist'), { recursive: true });
    cpSync(join(repoRoot, 'package.json'), join(root, 'package.json'));
    symlinkSync(join(repoRoot, 'node_modules'), join(root, 'node_modules'), 'dir');
    if (existsSync(join(repoRoot, 'build'))) symlinkSync(join(repoRoot, 'build'), join(root, 'build'), 'dir');
    if (m) applyImplMutant(join(root, 'dist'), m);
  } catch (e) {
    rmSync(root, { recursive: true, force: true });
    throw e;
  }
  return {
    root,
    cli: join(root, 'dist', 'cli', 'main.js'),
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}
