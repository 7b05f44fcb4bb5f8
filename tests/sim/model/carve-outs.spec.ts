/**
 * The carve-outs the larger check budgets needed (scenarios/properties/carve-outs.ts), as the
 * histories that found them, replayed command by command on the sim (strict): ingress mode,
 * pending enrollment and policy propagation let exactly those histories through; and each has a
 * positive control — the same property, in a world whose agents drop the inbound redirect
 * (a plan mutant), still catches the bypass on a pod that is neither ingress-mode nor pending.
 */
import { test, expect } from '@playwright/test';
import fc from 'fast-check';
import {
  ApplyPolicy,
  Connect,
  CreateNamespace,
  CreatePod,
  LabelNamespace,
  Settle,
  type AttackShape,
  type ModelCommand,
  type PodShape,
} from '../../../scenarios/model/commands.js';
import { emptyModel } from '../../../scenarios/model/model.js';
import { checkableProperties, defaultCatalog } from '../../../scenarios/model/catalog.js';
import { PropertyViolationError, type RunContext } from '../../../scenarios/model/run-context.js';
import { loadFactory } from '../../../scenarios/model/worlds.js';
import type { PropertyName } from '../../../scenarios/properties/index.js';

// Strict's inbound capture (inbound-tproxy).
const REDIRECT_INBOUND_MUTANT = 'ipv4 remove mangle/prert/tproxy-inbound';
const TCP: AttackShape = { family: undefined, proto: 'tcp', mark: undefined, raw: false, spoofIndex: undefined };

const pod = (nsIndex: number, nodeIndex: number, hostile: string[] = []): CreatePod =>
  new CreatePod({
    nsIndex,
    nodeIndex,
    mode: null,
    hostile,
    uidIndex: 0,
    caps: [],
    hostNetwork: false,
  } satisfies PodShape);

/** The check's prelude: ambient-a/p0 (node-0), plain/p1 (node-1), ambient-a/p2 (node-1), settled. */
const PRELUDE = (): ModelCommand[] => [
  new CreateNamespace('ambient-a', 'ambient'),
  new CreateNamespace('plain', null),
  pod(0, 0),
  pod(1, 1),
  pod(0, 1),
  new Settle(),
];

/** Run `cmds` as one history of the cell property × threat × strict; returns the violation thrown, if any. */
async function history(property: PropertyName, threatId: string, cmds: ModelCommand[], mutant?: string) {
  const factory = await loadFactory({ world: 'sim', ...(mutant ? { mutant } : {}) });
  const world = await factory.create({
    nodes: 2,
    profile: 'strict',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: true,
    seed: 5,
  });
  const prop = checkableProperties().find((p) => p.name === property);
  const threat = defaultCatalog().threats.find((t) => t.id === threatId);
  if (!prop || !threat) throw new Error(`no cell ${property} × ${threatId}`);
  const model = emptyModel(world.nodes, 'strict', threat);
  const [scheduler] = fc.sample(fc.scheduler(), { seed: 1, numRuns: 1 });
  const real: RunContext = { world, property: prop, dnsCapture: true, scheduler: scheduler!, steps: [], attempts: [] };
  let thrown: unknown;
  try {
    await fc.asyncModelRun(() => ({ model, real }), [...PRELUDE(), ...cmds]);
  } catch (e) {
    thrown = e;
  } finally {
    await world.close();
  }
  if (thrown !== undefined && !(thrown instanceof PropertyViolationError)) throw thrown;
  return { violation: thrown instanceof PropertyViolationError ? thrown.found.violation : undefined, real, model };
}

const direct = (real: RunContext): boolean[] =>
  real.attempts.flatMap((a) => a.result.deliveries.map((d) => !d.viaProxy));

// Pods sort as ambient-a/p0, ambient-a/p2, ambient-a/p3, plain/p1 once p3 exists.
const hostOnNode0 = { kind: 'host' as const, nodeIndex: 0, uidIndex: 0 };

test("ingress mode (authorization × host-process): a host process (uid 1000) reaches an ingress-mode pod's app directly, which the carve-out lets through for authorization and inbound capture", async () => {
  for (const property of ['authorization', 'inbound-capture'] as const) {
    const r = await history(property, 'host-process', [
      pod(0, 0, ['bypass-inbound']),
      new Connect(hostOnNode0, { kind: 'pod', index: 2, port: 8080 }, TCP),
    ]);
    expect(r.real.steps.at(-1)?.command).toBe('Connect(host:node-0 uid=1000 -> ambient-a/p3:8080)');
    expect(direct(r.real)).toEqual([true]); // the window is real: delivered without the proxy
    expect(r.violation, r.violation?.message).toBeUndefined();
  }
});

test('ingress mode, positive control: with the inbound redirect removed (mutant), the same host connection to a pod that is not in ingress mode is caught', async () => {
  const r = await history(
    'authorization',
    'host-process',
    [pod(0, 0), new Connect(hostOnNode0, { kind: 'pod', index: 2, port: 8080 }, TCP)],
    REDIRECT_INBOUND_MUTANT,
  );
  expect(r.violation?.message).toMatch(/^app ambient-a\/p3:8080 got a connection from .* that no proxy authorized$/);
  // And on the healthy world the same pod's inbound is captured: the mutant made the difference.
  const healthy = await history('authorization', 'host-process', [
    pod(0, 0),
    new Connect(hostOnNode0, { kind: 'pod', index: 2, port: 8080 }, TCP),
  ]);
  expect(healthy.violation).toBeUndefined();
  expect(direct(healthy.real)).toEqual([false]);
});

test("ingress mode keeps outbound capture: the ingress-mode pod's own connections still go through its proxy, and removing the outbound redirect is caught", async () => {
  const out = [
    pod(0, 0, ['bypass-inbound']),
    new Connect({ kind: 'pod', index: 2 }, { kind: 'pod', index: 3, port: 8080 }, TCP),
  ];
  const ok = await history('outbound-capture', 'app-nonroot', out);
  expect(ok.violation).toBeUndefined();
  expect(ok.real.attempts[0]?.result.acceptedBy).toBe('proxy-outbound');
  const broken = await history('outbound-capture', 'app-nonroot', out, 'ipv4 remove nat/out/redirect-outbound');
  expect(broken.violation?.message).toMatch(/^ambient-a\/p3: tcp to plain\/p1:8080 was first accepted by app/);
});

test('pending enrollment (inbound-capture × outside): a connection right after the namespace label, before the agent enrolled the pod, reaches the app directly and is let through; after a settle the pod is captured and converged', async () => {
  const r = await history('inbound-capture', 'outside', [
    new LabelNamespace(1, 'ambient'),
    new Connect({ kind: 'outside' }, { kind: 'pod', index: 2, port: 8080 }, TCP),
    new Settle(),
    new Connect({ kind: 'outside' }, { kind: 'pod', index: 2, port: 8080 }, TCP),
  ]);
  expect(r.real.steps.map((s) => s.command)).toContain('Connect(outside -> plain/p1:8080)');
  expect(direct(r.real)).toEqual([true, false]); // direct in the window, through the proxy after the settle
  expect(r.violation, r.violation?.message).toBeUndefined();
  const conv = await history('convergence', 'outside', [new LabelNamespace(1, 'ambient'), new Settle()]);
  expect(conv.violation).toBeUndefined();
});

test('pending enrollment, positive control: once settled the window is closed — with the inbound redirect removed (mutant), the relabelled pod is caught', async () => {
  const r = await history(
    'inbound-capture',
    'outside',
    [
      new LabelNamespace(1, 'ambient'),
      new Settle(),
      new Connect({ kind: 'outside' }, { kind: 'pod', index: 2, port: 8080 }, TCP),
    ],
    REDIRECT_INBOUND_MUTANT,
  );
  expect(r.violation?.message).toMatch(/^app plain\/p1:8080 accepted tcp from .* without its node proxy$/);
  // A pod nobody relabelled is never pending, settled or not.
  const other = await history(
    'inbound-capture',
    'outside',
    [new LabelNamespace(1, 'ambient'), new Connect({ kind: 'outside' }, { kind: 'pod', index: 0, port: 8080 }, TCP)],
    REDIRECT_INBOUND_MUTANT,
  );
  expect(other.violation?.message).toMatch(/^app ambient-a\/p0:8080 accepted tcp from .* without its node proxy$/);
});

test('policy propagation (authorization × outside): a connection right after a DENY policy is applied may still be allowed under the settled policies; after a settle the proxy enforces it', async () => {
  const deny = new ApplyPolicy({ nsIndex: 0, name: 'deny', action: 'DENY', rule: { kind: 'any' } });
  const r = await history('authorization', 'outside', [
    deny,
    new Connect({ kind: 'outside' }, { kind: 'pod', index: 0, port: 8080 }, TCP),
    new Settle(),
    new Connect({ kind: 'outside' }, { kind: 'pod', index: 0, port: 8080 }, TCP),
  ]);
  expect(r.violation, r.violation?.message).toBeUndefined();
  // The first attempt was delivered (the proxy had the old, empty set); the second was not.
  expect(r.real.attempts.map((a) => a.result.deliveries.length)).toEqual([1, 0]);
  expect(r.model.policySets).toEqual([]);
});
