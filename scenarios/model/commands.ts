/**
 * The model-based commands: one class per thing a history can do to a cluster. Each draws its
 * parameters as indexes and choices (resolved against the model when it runs, so a shrunk
 * sequence stays meaningful), acts on the World, updates the model, and — for Connect and
 * Settle — evaluates the property under check, throwing PropertyViolationError when it breaks.
 *
 * toString() reports what the command resolved to in its last run (fast-check allows that), so
 * a counterexample reads "CreatePod(ambient-a/p0 on node-1 uid=0 caps=NET_ADMIN)" and not indexes.
 */
import { DATAPLANE_MODE } from '../../impl/api/labels.js';
import type {
  AgentAddFault,
  AppCapability,
  Component,
  ConnectOptions,
  Destination,
  PolicyObject,
  Source,
} from '../world.js';
import { podKey } from '../world.js';
import {
  changePolicies,
  componentKey,
  isUp,
  markRelabelled,
  markSettled,
  pickNamespace,
  pickPod,
  podList,
  podsInNamespace,
  selectedAtCreation,
  type ClusterModel,
  type ModelPod,
} from './model.js';
import { checkAttempt, checkState, record, type RunContext } from './run-context.js';
import { ChangeCommand, type ModelCommand } from './change-command.js';

export type { ModelCommand } from './change-command.js';

/** Values of the dataplane-mode label a history may write (null removes it; 'Ambient' is hostile casing). */
export type ModeChoice = 'ambient' | 'none' | 'Ambient' | null;

function modeLabels(mode: ModeChoice): Record<string, string | null> {
  return { [DATAPLANE_MODE]: mode };
}

function applyLabels(target: Record<string, string>, patch: Record<string, string | null>): void {
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete target[k];
    else target[k] = v;
  }
}

function nodeAt(model: ClusterModel, index: number): string {
  const n = model.nodes[index % model.nodes.length];
  if (n === undefined) throw new Error('model has no nodes: the world reported an empty node list');
  return n;
}

export class CreateNamespace extends ChangeCommand {
  constructor(
    readonly name: string,
    readonly mode: ModeChoice,
  ) {
    super('CreateNamespace', `${name}${mode === null ? '' : ` mode=${mode}`}`);
  }
  check(m: Readonly<ClusterModel>): boolean {
    return !m.namespaces.has(this.name);
  }
  protected async change(m: ClusterModel, r: RunContext): Promise<string> {
    const labels: Record<string, string> = this.mode === null ? {} : { [DATAPLANE_MODE]: this.mode };
    await r.world.createNamespace(this.name, labels);
    m.namespaces.set(this.name, labels);
    return 'created';
  }
}

export class LabelNamespace extends ChangeCommand {
  constructor(
    readonly nsIndex: number,
    readonly mode: ModeChoice,
  ) {
    super('LabelNamespace', `? mode=${String(mode)}`);
  }
  check(m: Readonly<ClusterModel>): boolean {
    return m.namespaces.size > 0;
  }
  protected async change(m: ClusterModel, r: RunContext): Promise<string | undefined> {
    const ns = pickNamespace(m, this.nsIndex);
    if (ns === undefined) return undefined;
    this.resolved = `${ns} mode=${String(this.mode)}`;
    const patch = modeLabels(this.mode);
    await r.world.labelNamespace(ns, patch);
    applyLabels(m.namespaces.get(ns) ?? {}, patch);
    markRelabelled(m, podsInNamespace(m, ns));
    return 'labelled';
  }
}

/**
 * Annotations a hostile pod author may write to talk the mesh out of capturing it. One is
 * honoured by design: 'bypass-inbound' is ingress mode, the owner's own inbound opt-out
 * (carve-out ingress-mode); its outbound must still be captured, and what its proxy delivers
 * must still be authorized.
 */
export const HOSTILE_ANNOTATIONS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  'spoofed-status': { 'ambient.istio.io/redirection': 'enabled' },
  'bypass-inbound': { 'ambient.istio.io/bypass-inbound-capture': 'true' },
  'sidecar-status': { 'sidecar.istio.io/status': '{"containers":["istio-proxy"]}' },
  'reroute-virtual': { 'istio.io/reroute-virtual-interfaces': 'eth0,lo' },
  'dns-off': { 'ambient.istio.io/dns-capture': 'false' },
};

export interface PodShape {
  readonly nsIndex: number;
  readonly nodeIndex: number | undefined;
  readonly mode: ModeChoice;
  readonly hostile: readonly string[];
  readonly uidIndex: number;
  readonly caps: readonly AppCapability[];
  readonly hostNetwork: boolean;
}

export const APP_PORTS = [8080, 9090] as const;
/** The UDP port every app listens on (non-TCP bypass classes need a listener). */
export const APP_UDP_PORT = 5353;

export class CreatePod extends ChangeCommand {
  constructor(readonly shape: PodShape) {
    super('CreatePod');
  }
  check(m: Readonly<ClusterModel>): boolean {
    return m.namespaces.size > 0;
  }
  protected async change(m: ClusterModel, r: RunContext): Promise<string | undefined> {
    const ns = pickNamespace(m, this.shape.nsIndex);
    if (ns === undefined) return undefined;
    const name = `p${m.nextPod++}`;
    const uid = m.threat.uids[this.shape.uidIndex % m.threat.uids.length] ?? 1000;
    const caps = this.shape.caps.filter((c) => m.threat.caps.includes(c));
    const labels: Record<string, string> = this.shape.mode === null ? {} : { [DATAPLANE_MODE]: this.shape.mode };
    const annotations: Record<string, string> = {};
    for (const h of this.shape.hostile) Object.assign(annotations, HOSTILE_ANNOTATIONS[h] ?? {});
    const node = this.shape.nodeIndex === undefined ? undefined : nodeAt(m, this.shape.nodeIndex);
    const hostNetwork = this.shape.hostNetwork && m.threat.hostAttacker;
    // hostNetwork apps share the node's ports: give each its own, as a scheduler honouring hostPorts would.
    const offset = hostNetwork ? 20000 + 10 * m.nextPod : 0;
    const app = {
      uid,
      ...(m.threat.uidSource ? { uidSource: m.threat.uidSource } : {}),
      caps,
      tcpPorts: APP_PORTS.map((p) => p + offset),
      udpPorts: [APP_UDP_PORT + offset],
    };
    this.resolved =
      `${ns}/${name}${node ? ` on ${node}` : ''} uid=${uid}${caps.length ? ` caps=${caps.join('+')}` : ''}` +
      `${this.shape.mode === null ? '' : ` mode=${this.shape.mode}`}${hostNetwork ? ' hostNetwork' : ''}` +
      `${this.shape.hostile.length ? ` hostile=${this.shape.hostile.join('+')}` : ''}`;
    const selected = selectedAtCreation(m, { namespace: ns, labels, annotations, hostNetwork });
    const obs = await r.world.createPod({
      namespace: ns,
      name,
      ...(node ? { node } : {}),
      labels,
      annotations,
      hostNetwork,
      app,
    });
    if (selected && m.down.has(componentKey('agent', obs.node))) m.createdWhileAgentDown.add(obs.uid);
    m.pods.set(podKey({ namespace: ns, name }), {
      ref: { namespace: ns, name },
      uid: obs.uid,
      node: obs.node,
      labels: { ...labels },
      annotations,
      app,
      hostNetwork,
      ips: obs.ips,
      started: obs.started,
    });
    return `phase=${obs.phase} started=${obs.started} ips=${obs.ips.join(',')} redirected=${obs.redirected}`;
  }
}

export class LabelPod extends ChangeCommand {
  constructor(
    readonly podIndex: number,
    readonly mode: ModeChoice,
  ) {
    super('LabelPod', `? mode=${String(mode)}`);
  }
  check(m: Readonly<ClusterModel>): boolean {
    return m.pods.size > 0;
  }
  protected async change(m: ClusterModel, r: RunContext): Promise<string | undefined> {
    const p = pickPod(m, this.podIndex);
    if (!p) return undefined;
    this.resolved = `${podKey(p.ref)} mode=${String(this.mode)}`;
    const patch = modeLabels(this.mode);
    await r.world.labelPod(p.ref, patch);
    applyLabels(p.labels, patch);
    markRelabelled(m, [podKey(p.ref)]);
    return 'labelled';
  }
}

export class DeletePod extends ChangeCommand {
  constructor(readonly podIndex: number) {
    super('DeletePod');
  }
  check(m: Readonly<ClusterModel>): boolean {
    return m.pods.size > 0;
  }
  protected async change(m: ClusterModel, r: RunContext): Promise<string | undefined> {
    const p = pickPod(m, this.podIndex);
    if (!p) return undefined;
    this.resolved = podKey(p.ref);
    await r.world.deletePod(p.ref);
    m.pods.delete(podKey(p.ref));
    return 'deleted';
  }
}

/** An L4 rule of an AuthorizationPolicy, in the few shapes the histories draw. */
export type RuleShape =
  | { readonly kind: 'namespace'; readonly nsIndex: number }
  | { readonly kind: 'principal'; readonly nsIndex: number }
  | { readonly kind: 'port'; readonly port: number }
  | { readonly kind: 'ipBlock'; readonly cidr: string }
  | { readonly kind: 'any' };

interface PolicyShape {
  readonly nsIndex: number;
  readonly name: string;
  readonly action: 'ALLOW' | 'DENY';
  readonly rule: RuleShape;
  /** spec.selector.matchLabels (absent: the whole namespace). */
  readonly selector?: Readonly<Record<string, string>>;
}

function policyObject(m: Readonly<ClusterModel>, ns: string, shape: PolicyShape): PolicyObject {
  const rule = shape.rule;
  let rules: unknown[];
  switch (rule.kind) {
    case 'any':
      rules = [{}];
      break;
    case 'namespace':
      rules = [{ from: [{ source: { namespaces: [pickNamespace(m, rule.nsIndex) ?? ns] } }] }];
      break;
    case 'principal': {
      const src = pickNamespace(m, rule.nsIndex) ?? ns;
      rules = [{ from: [{ source: { principals: [`cluster.local/ns/${src}/sa/default`] } }] }];
      break;
    }
    case 'port':
      rules = [{ to: [{ operation: { ports: [String(rule.port)] } }] }];
      break;
    case 'ipBlock':
      rules = [{ from: [{ source: { ipBlocks: [rule.cidr] } }] }];
      break;
  }
  return {
    apiVersion: 'security.istio.io/v1',
    kind: 'AuthorizationPolicy',
    metadata: { namespace: ns, name: shape.name },
    spec: {
      ...(shape.selector ? { selector: { matchLabels: { ...shape.selector } } } : {}),
      action: shape.action,
      rules,
    },
  };
}

export class ApplyPolicy extends ChangeCommand {
  constructor(readonly shape: PolicyShape) {
    super('ApplyPolicy');
  }
  check(m: Readonly<ClusterModel>): boolean {
    return m.namespaces.size > 0;
  }
  protected async change(m: ClusterModel, r: RunContext): Promise<string | undefined> {
    const ns = pickNamespace(m, this.shape.nsIndex);
    if (ns === undefined) return undefined;
    const obj = policyObject(m, ns, this.shape);
    this.resolved = `${ns}/${this.shape.name} ${this.shape.action}${this.shape.selector ? ` selector=${JSON.stringify(this.shape.selector)}` : ''} ${JSON.stringify((obj['spec'] as { rules: unknown }).rules)}`;
    await r.world.applyPolicy(obj);
    changePolicies(m, () => m.policies.set(`${ns}/${this.shape.name}`, obj));
    return 'applied';
  }
}

export class DeletePolicy extends ChangeCommand {
  constructor(readonly index: number) {
    super('DeletePolicy');
  }
  check(m: Readonly<ClusterModel>): boolean {
    return m.policies.size > 0;
  }
  protected async change(m: ClusterModel, r: RunContext): Promise<string | undefined> {
    const keys = [...m.policies.keys()].sort();
    const key = keys[this.index % keys.length];
    if (key === undefined) return undefined;
    this.resolved = key;
    const [ns, name] = key.split('/') as [string, string];
    await r.world.deletePolicy(ns, name);
    changePolicies(m, () => m.policies.delete(key));
    return 'deleted';
  }
}

type ComponentOp = 'stop' | 'start' | 'restart';

export class ComponentCommand extends ChangeCommand {
  constructor(
    readonly op: ComponentOp,
    readonly component: Component,
    readonly nodeIndex: number,
  ) {
    super(`${op[0]?.toUpperCase()}${op.slice(1)}`, `${component} on ?`);
  }
  check(m: Readonly<ClusterModel>): boolean {
    const down = m.down.has(componentKey(this.component, nodeAt(m as ClusterModel, this.nodeIndex)));
    return this.op === 'start' ? down : this.op === 'stop' ? !down : true;
  }
  protected async change(m: ClusterModel, r: RunContext): Promise<string> {
    const node = nodeAt(m, this.nodeIndex);
    this.resolved = `${this.component} on ${node}`;
    await r.world[this.op](this.component, node);
    if (this.op === 'stop') m.down.add(componentKey(this.component, node));
    else m.down.delete(componentKey(this.component, node));
    return 'done';
  }
}

export class RebootNode extends ChangeCommand {
  constructor(readonly nodeIndex: number) {
    super('RebootNode');
  }
  check(): boolean {
    return true;
  }
  protected async change(m: ClusterModel, r: RunContext): Promise<string> {
    const node = nodeAt(m, this.nodeIndex);
    this.resolved = node;
    await r.world.rebootNode(node);
    // A reboot brings the node's components back up (they are DaemonSets).
    m.down.delete(componentKey('agent', node));
    m.down.delete(componentKey('proxy', node));
    return 'rebooted';
  }
}

export class DropWatches extends ChangeCommand {
  constructor() {
    super('DropWatches', '');
  }
  check(): boolean {
    return true;
  }
  protected async change(_m: ClusterModel, r: RunContext): Promise<string> {
    await r.world.dropWatches();
    return 'dropped';
  }
}

export class Settle implements ModelCommand {
  check(): boolean {
    return true;
  }
  async run(m: ClusterModel, r: RunContext): Promise<void> {
    await r.world.settle();
    markSettled(m);
    record(r, this.toString(), 'quiescent');
    await checkState(r, m);
  }
  toString(): string {
    return 'Settle()';
  }
}

/** Where a drawn connection starts, before resolution against the model. */
export type SourceShape =
  | { readonly kind: 'pod'; readonly index: number }
  | { readonly kind: 'host'; readonly nodeIndex: number; readonly uidIndex: number }
  | { readonly kind: 'outside' };

export type DestinationShape =
  | { readonly kind: 'pod'; readonly index: number; readonly port: number }
  /** Another pod's address used directly (e.g. the v6 one, or from a spoofed socket). */
  | { readonly kind: 'pod-ip'; readonly index: number; readonly ipIndex: number; readonly port: number }
  | { readonly kind: 'ip'; readonly ip: string; readonly port: number }
  /**
   * A node's own address (World.nodeAddresses): a host socket, a hostNetwork app (port
   * HOST_APP_PORT: the first TCP port of a hostNetwork pod on that node), or nothing.
   */
  | { readonly kind: 'node'; readonly nodeIndex: number; readonly ipIndex: number; readonly port: number };

/** DestinationShape 'node' port meaning "the first TCP port of a hostNetwork pod on the node" (8080 when there is none). */
export const HOST_APP_PORT = -1;

export interface AttackShape {
  readonly family: 4 | 6 | undefined;
  readonly proto: 'tcp' | 'udp';
  readonly mark: number | undefined;
  readonly raw: boolean;
  /** Spoof the source as another pod's first IP (index) when defined. */
  readonly spoofIndex: number | undefined;
}

function describeSource(s: Source): string {
  if (s.kind === 'pod') return podKey(s.pod);
  if (s.kind === 'host') return `host:${s.node} uid=${s.uid}${s.caps.length ? ` caps=${s.caps.join('+')}` : ''}`;
  return 'outside';
}

function describeDestination(d: Destination): string {
  return d.kind === 'pod' ? `${podKey(d.pod)}:${d.port}` : `${d.ip.includes(':') ? `[${d.ip}]` : d.ip}:${d.port}`;
}

export function describeOptions(o: ConnectOptions): string {
  const parts: string[] = [];
  if (o.proto === 'udp') parts.push('udp');
  if (o.family === 6) parts.push('v6');
  if (o.mark !== undefined) parts.push(`mark=0x${o.mark.toString(16)}`);
  if (o.raw) parts.push('raw');
  if (o.sourceIp) parts.push(`src=${o.sourceIp}`);
  return parts.join(' ');
}

/** The mesh's intent for a pod, as the model knows it (labels written), without the system's say. */
function intendedEnrolled(m: Readonly<ClusterModel>, p: ModelPod): boolean {
  const podMode = p.labels[DATAPLANE_MODE];
  if (podMode === 'ambient') return true;
  if (podMode === 'none') return false;
  return m.namespaces.get(p.ref.namespace)?.[DATAPLANE_MODE] === 'ambient';
}

/** Pods that may source an attack: any, for an app attacker; unenrolled ones from the other-node vantage. */
function attackerPod(m: Readonly<ClusterModel>, p: ModelPod): boolean {
  return m.threat.vantage !== 'other-node' || (!intendedEnrolled(m, p) && !p.hostNetwork);
}

export class Connect implements ModelCommand {
  private resolved = '?';
  constructor(
    readonly from: SourceShape,
    readonly to: DestinationShape,
    readonly attack: AttackShape,
  ) {}
  check(m: Readonly<ClusterModel>): boolean {
    if (this.from.kind === 'pod' && !pickPod(m, 0, (p) => p.started && attackerPod(m, p))) return false;
    if (this.from.kind === 'host' && !m.threat.hostAttacker) return false;
    if (this.from.kind === 'outside' && !m.threat.outsideAttacker) return false;
    if ((this.to.kind === 'pod' || this.to.kind === 'pod-ip') && m.pods.size === 0) return false;
    return true;
  }
  private resolve(
    m: ClusterModel,
    nodeIps: Readonly<Record<string, readonly string[]>> | undefined,
  ): { from: Source; to: Destination; opts: ConnectOptions } | undefined {
    let from: Source;
    let fromPod: ModelPod | undefined;
    if (this.from.kind === 'pod') {
      fromPod = pickPod(m, this.from.index, (p) => p.started && attackerPod(m, p));
      if (!fromPod) return undefined;
      from = { kind: 'pod', pod: fromPod.ref };
    } else if (this.from.kind === 'host') {
      from = {
        kind: 'host',
        node: nodeAt(m, this.from.nodeIndex),
        uid: m.threat.uids[this.from.uidIndex % m.threat.uids.length] ?? 0,
        caps: [...m.threat.caps],
      };
    } else {
      from = { kind: 'outside' };
    }
    let to: Destination;
    if (this.to.kind === 'ip') {
      to = { kind: 'ip', ip: this.to.ip, port: this.to.port };
    } else if (this.to.kind === 'node') {
      const node = nodeAt(m, this.to.nodeIndex);
      const ips = nodeIps?.[node] ?? [];
      const ip = ips[this.to.ipIndex % Math.max(1, ips.length)];
      if (ip === undefined) return undefined;
      const hostApp = podList(m).find((p) => p.hostNetwork && p.node === node && p.started);
      const port = this.to.port === HOST_APP_PORT ? (hostApp?.app.tcpPorts[0] ?? APP_PORTS[0]) : this.to.port;
      to = { kind: 'ip', ip, port };
    } else {
      const dst = pickPod(m, this.to.index);
      if (!dst) return undefined;
      if (this.to.kind === 'pod') to = { kind: 'pod', pod: dst.ref, port: this.to.port };
      else {
        const ip = dst.ips[this.to.ipIndex % Math.max(1, dst.ips.length)];
        if (ip === undefined) return undefined;
        to = { kind: 'ip', ip, port: this.to.port };
      }
    }
    // The threat model bounds the attack: options it does not grant are still tried (the kernel
    // must refuse them), except spoofing and raw sockets, which are drawn only when it grants caps.
    const caps = from.kind === 'pod' ? (fromPod?.app.caps ?? []) : from.kind === 'host' ? from.caps : [];
    // An explicit address decides the family; the drawn one applies to pod destinations.
    const family = to.kind === 'ip' ? (to.ip.includes(':') ? 6 : undefined) : this.attack.family;
    const opts: ConnectOptions = {
      ...(family !== undefined ? { family } : {}),
      proto: this.attack.proto,
      ...(this.attack.mark !== undefined ? { mark: this.attack.mark } : {}),
      ...(this.attack.raw && caps.includes('NET_RAW') ? { raw: true } : {}),
    };
    if (this.attack.spoofIndex !== undefined && caps.includes('NET_ADMIN')) {
      const victim = pickPod(m, this.attack.spoofIndex);
      const ip = victim?.ips[0];
      if (ip !== undefined) return { from, to, opts: { ...opts, sourceIp: ip } };
    }
    return { from, to, opts };
  }
  async run(m: ClusterModel, r: RunContext): Promise<void> {
    let nodeIps: Readonly<Record<string, readonly string[]>> | undefined;
    if (this.to.kind === 'node') {
      if (!r.world.nodeAddresses) {
        record(r, this.toString(), 'skipped: the world does not report node addresses');
        return;
      }
      nodeIps = await r.world.nodeAddresses();
    }
    const resolved = this.resolve(m, nodeIps);
    if (!resolved) return;
    const { from, to, opts } = resolved;
    // Only the pending-enrollment carve-out reads the pods as they were before the attempt.
    const podsBefore = m.relabelled.size > 0 ? await r.world.pods() : undefined;
    this.resolved = `${describeSource(from)} -> ${describeDestination(to)}${describeOptions(opts) ? ` ${describeOptions(opts)}` : ''}`;
    const result = await r.world.connect(from, to, opts);
    record(
      r,
      this.toString(),
      `${result.outcome}${result.acceptedBy ? ` by ${result.acceptedBy}` : ''}${result.error ? ` (${result.error})` : ''}` +
        `${result.deliveries.length ? ` delivered to ${result.deliveries.map((d) => `${podKey(d.pod)}:${d.port}${d.viaProxy ? '' : ' DIRECT'}`).join(', ')}` : ''}`,
    );
    await checkAttempt(r, m, { from, to, opts, result }, podsBefore);
  }
  toString(): string {
    return `Connect(${this.resolved})`;
  }
}

/**
 * A pod created while the node agent of its node refuses CNI ADDs (World.agentAddFault: its
 * netns invisible to the agent, or a pod uid the agent's cache does not hold). The plugin must
 * fail the ADD, so the pod must not run unredirected: the fail-closed property judges the new
 * pod right after its creation, while the fault still holds, and at every later settle. The
 * fault is lifted at the end of the command. A world without the seam skips the command.
 */
export class CreatePodAgentFault implements ModelCommand {
  private resolved = '?';
  private readonly create: CreatePod;
  constructor(
    readonly shape: PodShape,
    readonly fault: AgentAddFault,
  ) {
    // The fault is per node, so the pod goes to a named node.
    this.create = new CreatePod({ ...shape, nodeIndex: shape.nodeIndex ?? 0 });
  }
  check(m: Readonly<ClusterModel>): boolean {
    return m.namespaces.size > 0;
  }
  async run(m: ClusterModel, r: RunContext): Promise<void> {
    const world = r.world;
    if (!world.agentAddFault) {
      record(r, this.toString(), 'skipped: the world has no agentAddFault');
      return;
    }
    const node = nodeAt(m, this.create.shape.nodeIndex ?? 0);
    const before = new Set([...m.pods.values()].map((p) => p.uid));
    await world.agentAddFault(node, this.fault);
    this.resolved = `${this.fault} on ${node}`;
    record(r, this.toString(), 'the node agent refuses CNI ADDs of new sandboxes');
    try {
      await this.create.run(m, r);
      this.resolved = `${this.fault} on ${node}: ${this.create.toString()}`;
      const pod = [...m.pods.values()].find((p) => !before.has(p.uid));
      // With the agent down the ADD fails for that reason (createdWhileAgentDown covers it).
      if (pod && isUp(m, 'agent', node)) {
        m.addRefusedByAgent.add(pod.uid);
        // Only this pod's fail-closed facts: earlier pods may be in a relabel window right now.
        if (r.property.name === 'fail-closed')
          await checkState(r, m, { createdWhileAgentDown: new Set(), addRefusedByAgent: new Set([pod.uid]) });
      }
    } finally {
      await world.agentAddFault(node, undefined);
    }
  }
  toString(): string {
    return `CreatePodAgentFault(${this.resolved})`;
  }
}

/** One rule of an overlapping ALLOW/DENY pair; `port` and `principal`/`namespace` share the pair's parameters. */
export type OverlapRuleKind = 'any' | 'port' | 'principal' | 'namespace';

interface OverlapShape {
  /** The target: a started pod (index over started pods); its namespace gets both policies. */
  readonly podIndex: number;
  /** Both policies select the target by its dataplane-mode label (when it has one) instead of the whole namespace. */
  readonly selector: boolean;
  readonly allow: OverlapRuleKind;
  readonly deny: OverlapRuleKind;
  readonly denyFirst: boolean;
  /** The port both `port` rules name, and the port the probe connects to. */
  readonly port: number;
  /** The source namespace `principal`/`namespace` rules name (index over namespaces). */
  readonly srcNsIndex: number;
  readonly from: SourceShape;
}

/**
 * An enforced ALLOW and an enforced DENY on the same target that can both match one
 * connection, then a settle, then that connection: DENY must win (as in istio/ztunnel src/rbac.rs: DENY policies are evaluated before ALLOW). Random
 * ApplyPolicy commands rarely line this up (the same target, overlapping rules, a settle so the
 * policy-propagation window is closed, and a matching connection), so this command does it on
 * purpose, through the ordinary ApplyPolicy, Settle and Connect commands and their judges.
 */
export class PolicyOverlap implements ModelCommand {
  private readonly parts: string[] = [];
  constructor(readonly shape: OverlapShape) {}
  check(m: Readonly<ClusterModel>): boolean {
    return [...m.pods.values()].some((p) => p.started);
  }
  private rule(kind: OverlapRuleKind): RuleShape {
    switch (kind) {
      case 'any':
        return { kind: 'any' };
      case 'port':
        return { kind: 'port', port: this.shape.port };
      case 'principal':
        return { kind: 'principal', nsIndex: this.shape.srcNsIndex };
      case 'namespace':
        return { kind: 'namespace', nsIndex: this.shape.srcNsIndex };
    }
  }
  async run(m: ClusterModel, r: RunContext): Promise<void> {
    this.parts.length = 0;
    const target = pickPod(m, this.shape.podIndex, (p) => p.started);
    if (!target) return;
    const ns = target.ref.namespace;
    const nsIndex = [...m.namespaces.keys()].sort().indexOf(ns);
    if (nsIndex < 0) return;
    const mode = target.labels[DATAPLANE_MODE];
    const selector = this.shape.selector && mode !== undefined ? { [DATAPLANE_MODE]: mode } : undefined;
    const policy = (action: 'ALLOW' | 'DENY'): ApplyPolicy =>
      new ApplyPolicy({
        nsIndex,
        name: action === 'ALLOW' ? 'overlap-allow' : 'overlap-deny',
        action,
        rule: this.rule(action === 'ALLOW' ? this.shape.allow : this.shape.deny),
        ...(selector ? { selector } : {}),
      });
    const steps: ModelCommand[] = this.shape.denyFirst
      ? [policy('DENY'), policy('ALLOW')]
      : [policy('ALLOW'), policy('DENY')];
    steps.push(new Settle());
    const podIndex = podList(m).findIndex((p) => podKey(p.ref) === podKey(target.ref));
    steps.push(
      new Connect(
        this.shape.from,
        { kind: 'pod', index: podIndex, port: this.shape.port },
        { family: undefined, proto: 'tcp', mark: undefined, raw: false, spoofIndex: undefined },
      ),
    );
    for (const step of steps) {
      if (!step.check(m)) {
        this.parts.push(`${step.toString()} skipped`);
        continue;
      }
      try {
        await step.run(m, r);
      } finally {
        this.parts.push(step.toString());
      }
    }
  }
  toString(): string {
    return `PolicyOverlap(${this.parts.join('; ') || '?'})`;
  }
}
