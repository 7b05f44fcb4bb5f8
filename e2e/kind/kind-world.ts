/**
 * The kind world (scenarios/world.ts) — PARTIAL. A real cluster per world: kind creates it
 * (kindnet primary, fixtures/kind/cluster.yaml), our images are built and loaded, the manifests
 * applied (e2e/kind/kind-cli.ts); the API side goes through @kubernetes/client-node.
 *
 * Implemented: cluster lifecycle, namespaces, pods (a probe container running `sleep`, with the
 * threat model's uid/capabilities), labels, AuthorizationPolicies, observations from the API,
 * component restart (deleting the DaemonSet pod on the node). Not yet: connect() (needs a probe
 * program in the probe image and exec through client-node's Exec), stop/start of a component on
 * one node, rebootNode, dropWatches — they throw saying so.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import type { Component, ConnectResult, PodObservation, PodRef, PodSpec, PolicyObject, World, WorldFactory, WorldOptions } from '../../scenarios/world.js';
import { KindCli, SYSTEM_NAMESPACE } from './kind-cli.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PROBE_IMAGE = 'busybox:1.36';
const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

function notYet(what: string): never {
  throw new Error(`kind world: ${what} is not implemented yet (see e2e/kind/kind-world.ts); run this scenario in the sim or netns world`);
}

class KindWorld implements World {
  readonly kind = 'kind' as const;
  private readonly core: k8s.CoreV1Api;
  private readonly custom: k8s.CustomObjectsApi;

  constructor(readonly options: WorldOptions, readonly nodes: readonly string[], private readonly cli: KindCli, kc: k8s.KubeConfig, private readonly tmp: string) {
    this.core = kc.makeApiClient(k8s.CoreV1Api);
    this.custom = kc.makeApiClient(k8s.CustomObjectsApi);
  }

  async createNamespace(name: string, labels: Readonly<Record<string, string>> = {}): Promise<void> {
    await this.core.createNamespace({ body: { metadata: { name, labels: { ...labels } } } });
  }

  async labelNamespace(name: string, labels: Readonly<Record<string, string | null>>): Promise<void> {
    await this.core.patchNamespace({ name, body: { metadata: { labels } } }, merge);
  }

  async createPod(spec: PodSpec): Promise<PodObservation> {
    await this.core.createNamespacedPod({
      namespace: spec.namespace,
      body: {
        metadata: { name: spec.name, labels: { ...spec.labels }, annotations: { ...spec.annotations } },
        spec: {
          ...(spec.node ? { nodeName: spec.node } : {}),
          ...(spec.serviceAccount ? { serviceAccountName: spec.serviceAccount } : {}),
          hostNetwork: spec.hostNetwork ?? false,
          terminationGracePeriodSeconds: 1,
          containers: [{
            name: 'app',
            image: PROBE_IMAGE,
            command: ['sleep', '86400'],
            securityContext: { runAsUser: spec.app.uid, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'], add: [...spec.app.caps] } },
            ports: spec.app.tcpPorts.map((p) => ({ containerPort: p, protocol: 'TCP' })),
          }],
        },
      },
    });
    // settled: Running, or a sandbox failure event (the plugin refused it) after a bounded wait
    for (let i = 0; i < 120; i++) {
      const obs = (await this.pods()).find((p) => p.namespace === spec.namespace && p.name === spec.name);
      if (obs && (obs.started || obs.phase === 'Failed')) return obs;
      await new Promise((r) => setTimeout(r, 1000));
    }
    const last = (await this.pods()).find((p) => p.namespace === spec.namespace && p.name === spec.name);
    if (!last) throw new Error(`kind world: pod ${spec.namespace}/${spec.name} vanished while starting`);
    return last;
  }

  async labelPod(pod: PodRef, labels: Readonly<Record<string, string | null>>): Promise<void> {
    await this.core.patchNamespacedPod({ name: pod.name, namespace: pod.namespace, body: { metadata: { labels } } }, merge);
  }

  async deletePod(pod: PodRef): Promise<void> {
    await this.core.deleteNamespacedPod({ name: pod.name, namespace: pod.namespace, gracePeriodSeconds: 0 });
  }

  async applyPolicy(policy: PolicyObject): Promise<void> {
    const meta = policy['metadata'] as { name: string; namespace: string };
    const target = { group: 'security.istio.io', version: 'v1', namespace: meta.namespace, plural: 'authorizationpolicies' };
    const body = { apiVersion: 'security.istio.io/v1', kind: 'AuthorizationPolicy', ...policy };
    try {
      await this.custom.replaceNamespacedCustomObject({ ...target, name: meta.name, body });
    } catch {
      await this.custom.createNamespacedCustomObject({ ...target, body });
    }
  }

  async deletePolicy(namespace: string, name: string): Promise<void> {
    await this.custom.deleteNamespacedCustomObject({ group: 'security.istio.io', version: 'v1', namespace, plural: 'authorizationpolicies', name });
  }

  async restart(component: Component, node: string): Promise<void> {
    const pods = await this.core.listNamespacedPod({ namespace: SYSTEM_NAMESPACE, labelSelector: `app.kubernetes.io/name=ambient-lab-${component}`, fieldSelector: `spec.nodeName=${node}` });
    for (const p of pods.items) await this.core.deleteNamespacedPod({ name: p.metadata!.name!, namespace: SYSTEM_NAMESPACE });
  }

  stop(component: Component, node: string): Promise<void> { return notYet(`stop(${component}, ${node})`); }
  start(component: Component, node: string): Promise<void> { return notYet(`start(${component}, ${node})`); }
  rebootNode(node: string): Promise<void> { return notYet(`rebootNode(${node})`); }
  dropWatches(): Promise<void> { return notYet('dropWatches()'); }
  connect(): Promise<ConnectResult> { return notYet('connect()'); }

  async settle(): Promise<void> {
    await new Promise((r) => setTimeout(r, 2000));
  }

  async pods(): Promise<readonly PodObservation[]> {
    const list = await this.core.listPodForAllNamespaces();
    return list.items.filter((p) => p.metadata?.namespace !== SYSTEM_NAMESPACE && p.metadata?.namespace !== 'kube-system' && p.metadata?.namespace !== 'local-path-storage').map((p) => ({
      namespace: p.metadata!.namespace!,
      name: p.metadata!.name!,
      uid: p.metadata!.uid!,
      node: p.spec?.nodeName ?? '',
      labels: p.metadata?.labels ?? {},
      phase: p.status?.phase ?? 'Unknown',
      started: p.status?.containerStatuses?.every((c) => c.state?.running !== undefined) ?? false,
      hostNetwork: p.spec?.hostNetwork === true,
      ips: (p.status?.podIPs ?? []).map((x) => x.ip),
      annotation: p.metadata?.annotations?.['ambient.istio.io/redirection'],
      // Not observable from the API alone; needs the agent's /status endpoint (not wired yet).
      redirected: p.metadata?.annotations?.['ambient.istio.io/redirection'] === 'enabled',
      served: false,
    }));
  }

  async close(): Promise<void> {
    try {
      await this.cli.deleteCluster();
    } finally {
      await rm(this.tmp, { recursive: true, force: true });
    }
  }
}

export const kindWorldFactory: WorldFactory = {
  kind: 'kind',
  available: () => (process.env['KIND'] === '1'
    ? { ok: true, reason: 'KIND=1 (needs kind and a Docker engine)' }
    : { ok: false, reason: 'kind world runs only when asked: set KIND=1 (needs Docker and kind)' }),
  async create(options: WorldOptions): Promise<World> {
    if (options.meshV6 !== undefined && options.meshV6 !== options.ipv6) throw new Error(`kind world: meshV6 ${options.meshV6} with ipv6 ${options.ipv6} is unsupported; run that case on the sim world`);
    const tmp = await mkdtemp(path.join(os.tmpdir(), 'al-kind-'));
    const cluster = `al-${process.pid.toString(36)}-${options.seed.toString(36)}`.slice(0, 30).replace(/-+$/, '');
    const cli = new KindCli({ cluster, repoRoot, kubeconfig: path.join(tmp, 'kubeconfig') });
    await cli.up({ build: process.env['AMBIENT_LAB_SKIP_IMAGE_BUILD'] !== '1' });
    try {
      const kc = new k8s.KubeConfig();
      kc.loadFromFile(path.join(tmp, 'kubeconfig'));
      const nodes = (await kc.makeApiClient(k8s.CoreV1Api).listNode()).items.map((n) => n.metadata!.name!);
      return new KindWorld(options, nodes, cli, kc, tmp);
    } catch (e) {
      await cli.deleteCluster().catch(() => undefined);
      await rm(tmp, { recursive: true, force: true });
      throw e;
    }
  },
};
