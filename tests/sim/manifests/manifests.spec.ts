/**
 * The deployment manifests (deploy/: the base rendered by `kubectl kustomize`, and the CRD
 * created apart from it) against the Kubernetes schemas
 * (kubernetes-models 4.5.1 validate(): the upstream OpenAPI schemas, CRD included), plus the
 * deployment decisions the schemas cannot see: capabilities exactly as justified in the
 * manifests' comments, no privileged containers, node-critical priority, tolerate-all,
 * out-of-mesh labels, every host path used, and the socket / kubeconfig paths the processes
 * agree on.
 */
import { test, expect } from '@playwright/test';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { kubectlAvailability, renderKustomization } from '../../../e2e/deployment/launch.js';
import { parseAllDocuments } from 'yaml';
import { Namespace, Service, ServiceAccount } from 'kubernetes-models/v1';
import { DaemonSet, Deployment } from 'kubernetes-models/apps/v1';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1';
import { AuthorizationPolicy } from '@kubernetes-models/istio/security.istio.io/v1';
import { PROXY_NODE_FLAGS } from '../../../impl/linux/node-flags.js';
import { agentSettings } from '../../../impl/linux/node-agent-config.js';
import { installerSettings } from '../../../impl/linux/cni-installer-config.js';
import { parsePluginConfig } from '../../../impl/api/cni-plugin-config.js';
import type { EnrollmentConfig } from '../../../impl/api/enrollment-config.js';
import type { CniNetConf } from '../../../impl/api/cni.js';
import type { IDaemonSet, IDeployment } from 'kubernetes-models/apps/v1';

const kubectl = kubectlAvailability();
test.skip(!kubectl.ok, kubectl.reason);

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const DEPLOY = path.join(REPO, 'deploy');

type Doc = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } } & Record<
  string,
  unknown
>;

/** The base and the CRD, rendered; `file` says which. Empty without kubectl (the tests skip). */
function load(): Array<{ file: string; doc: Doc }> {
  if (!kubectl.ok) return [];
  const out: Array<{ file: string; doc: Doc }> = [];
  for (const k of ['base', 'crd']) {
    const file = `deploy/${k}`;
    for (const d of parseAllDocuments(renderKustomization(path.join(DEPLOY, k)))) {
      if (d.errors.length) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
      const doc = d.toJS() as Doc | null;
      if (doc) out.push({ file, doc });
    }
  }
  return out;
}

/** The schema model for a document; an unknown kind is a test failure (add it here). */
function validate(doc: Doc): void {
  const key = `${doc.apiVersion}/${doc.kind}`;
  // each model's constructor takes the plain object; validate() throws on any schema violation
  const models: Record<string, (d: Doc) => { validate(): void }> = {
    'v1/Namespace': (d) => new Namespace(d as never),
    'v1/ServiceAccount': (d) => new ServiceAccount(d as never),
    'apps/v1/DaemonSet': (d) => new DaemonSet(d as never),
    'apps/v1/Deployment': (d) => new Deployment(d as never),
    'v1/Service': (d) => new Service(d as never),
    'rbac.authorization.k8s.io/v1/ClusterRole': (d) => new ClusterRole(d as never),
    'rbac.authorization.k8s.io/v1/ClusterRoleBinding': (d) => new ClusterRoleBinding(d as never),
    'rbac.authorization.k8s.io/v1/Role': (d) => new Role(d as never),
    'rbac.authorization.k8s.io/v1/RoleBinding': (d) => new RoleBinding(d as never),
    'apiextensions.k8s.io/v1/CustomResourceDefinition': (d) => new CustomResourceDefinition(d as never),
  };
  const make = models[key];
  if (!make) throw new Error(`no schema model for ${key}`);
  make(doc).validate();
}

const docs = load();
const daemonSets = docs.filter((d) => d.doc.kind === 'DaemonSet').map((d) => d.doc as unknown as IDaemonSet);
const ds = (name: string): IDaemonSet =>
  daemonSets.find((d) => d.metadata?.name === name) ??
  (() => {
    throw new Error(`no DaemonSet ${name}`);
  })();

test('every manifest document validates against the Kubernetes schemas (CRD included)', () => {
  expect(docs.map((d) => `${d.doc.kind}/${d.doc.metadata.name}`).sort()).toEqual([
    'ClusterRole/ambient-lab-agent',
    'ClusterRole/ambient-lab-ca',
    'ClusterRole/ambient-lab-proxy',
    'ClusterRoleBinding/ambient-lab-agent',
    'ClusterRoleBinding/ambient-lab-ca',
    'ClusterRoleBinding/ambient-lab-proxy',
    'CustomResourceDefinition/authorizationpolicies.security.istio.io',
    'DaemonSet/ambient-lab-agent',
    'DaemonSet/ambient-lab-proxy',
    'Deployment/ambient-lab-ca',
    'Namespace/ambient-lab-system',
    'Role/ambient-lab-agent',
    'RoleBinding/ambient-lab-agent',
    'Service/ambient-lab-ca',
    'ServiceAccount/ambient-lab-agent',
    'ServiceAccount/ambient-lab-ca',
    'ServiceAccount/ambient-lab-proxy',
  ]);
  for (const { file, doc } of docs)
    expect(() => validate(doc), `${file} ${doc.kind}/${doc.metadata.name}`).not.toThrow();
});

test('the validator can fail: broken copies of our manifests are rejected', () => {
  const agent = structuredClone(docs.find((d) => d.doc.kind === 'DaemonSet')!.doc) as unknown as {
    spec: { template: { spec: { containers: Array<Record<string, unknown>> } } };
  };
  agent.spec.template.spec.containers[1]!['ports'] = [{ containerPort: 'health' }];
  expect(() => validate(agent as unknown as Doc)).toThrow();
  const noSelector = structuredClone(docs.find((d) => d.doc.kind === 'DaemonSet')!.doc) as Record<
    string,
    Record<string, unknown>
  >;
  delete noSelector['spec']!['selector'];
  expect(() => validate(noSelector as unknown as Doc)).toThrow();
  const crd = structuredClone(docs.find((d) => d.doc.kind === 'CustomResourceDefinition')!.doc) as unknown as {
    spec: Record<string, unknown>;
  };
  crd.spec['scope'] = 42;
  expect(() => validate(crd as unknown as Doc)).toThrow();
});

test("the CRD serves security.istio.io/v1 AuthorizationPolicy, and a policy our scenarios use validates against Istio's schema", () => {
  const crd = docs.find((d) => d.doc.kind === 'CustomResourceDefinition')!.doc as unknown as {
    spec: {
      group: string;
      names: { kind: string; plural: string };
      versions: Array<{ name: string; served: boolean; storage: boolean }>;
    };
  };
  expect(crd.spec.group).toBe('security.istio.io');
  expect(crd.spec.names).toMatchObject({ kind: 'AuthorizationPolicy', plural: 'authorizationpolicies' });
  expect(crd.spec.versions.filter((v) => v.storage).map((v) => v.name)).toEqual(['v1']);
  const policy = new AuthorizationPolicy({
    metadata: { name: 'allow-client', namespace: 'app' },
    spec: {
      action: 'ALLOW',
      rules: [
        {
          from: [{ source: { principals: ['cluster.local/ns/app/sa/client'] } }],
          to: [{ operation: { ports: ['8080'] } }],
        },
      ],
    },
  });
  expect(() => policy.validate()).not.toThrow();
});

/** Capabilities each container may add, with the justification in the manifests' comments. */
const ALLOWED_CAPS: Record<string, readonly string[]> = {
  'ambient-lab-agent/agent': ['NET_ADMIN', 'NET_RAW', 'SYS_ADMIN', 'SYS_PTRACE'],
  'ambient-lab-agent/install-cni': [],
  'ambient-lab-proxy/proxy': ['NET_ADMIN', 'SYS_ADMIN'],
};

/**
 * Containers that must allow privilege escalation, and why: the non-root proxy gets its two
 * capabilities only from file capabilities on its node binary, which no_new_privs would block.
 */
const ESCALATES: Record<string, string> = { 'ambient-lab-proxy/proxy': '/app/node-netcaps' };

test('containers drop ALL capabilities and add back exactly the justified ones; none is privileged; only the file-capability proxy may escalate', () => {
  const seen: string[] = [];
  for (const d of daemonSets) {
    const pod = d.spec!.template.spec!;
    for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
      const id = `${d.metadata!.name}/${c.name}`;
      seen.push(id);
      const sc = c.securityContext ?? {};
      expect(sc.privileged, id).not.toBe(true);
      expect(sc.allowPrivilegeEscalation, id).toBe(ESCALATES[id] !== undefined);
      if (ESCALATES[id]) expect(c.command?.[0], id).toBe(ESCALATES[id]);
      expect(sc.readOnlyRootFilesystem, id).toBe(true);
      expect(sc.capabilities?.drop, id).toEqual(['ALL']);
      expect([...(sc.capabilities?.add ?? [])].sort(), id).toEqual([...(ALLOWED_CAPS[id] ?? ['<not allowed>'])].sort());
    }
  }
  expect(seen.sort()).toEqual(Object.keys(ALLOWED_CAPS).sort());
});

test('DaemonSets: node-critical, tolerate every taint, out of the mesh, their own service account', () => {
  for (const d of daemonSets) {
    const name = d.metadata!.name!;
    const t = d.spec!.template;
    expect(t.spec!.priorityClassName, name).toBe('system-node-critical');
    expect(t.spec!.tolerations, name).toEqual([{ operator: 'Exists' }]);
    expect(t.metadata!.labels!['istio.io/dataplane-mode'], name).toBe('none');
    expect(t.spec!.serviceAccountName, name).toBe(name);
    expect(d.metadata!.namespace).toBe('ambient-lab-system');
    // the selector selects the template
    for (const [k, v] of Object.entries(d.spec!.selector.matchLabels ?? {}))
      expect(t.metadata!.labels![k], name).toBe(v);
  }
  const ns = docs.find((d) => d.doc.kind === 'Namespace')!.doc as unknown as {
    metadata: { labels: Record<string, string> };
  };
  expect(ns.metadata.labels['istio.io/dataplane-mode']).toBe('none');
});

test('mounts: every volume is used; only install-cni writes the CNI dirs (the agent reads them for readiness), the proxy sees no host CNI, netns or /proc paths', () => {
  for (const d of daemonSets) {
    const pod = d.spec!.template.spec!;
    const used = new Set(
      [...(pod.initContainers ?? []), ...pod.containers].flatMap((c) => (c.volumeMounts ?? []).map((m) => m.name)),
    );
    expect([...used].sort(), d.metadata!.name).toEqual((pod.volumes ?? []).map((v) => v.name).sort());
  }
  const agentPod = ds('ambient-lab-agent').spec!.template.spec!;
  const hostPaths = (names: readonly string[]) =>
    (agentPod.volumes ?? []).filter((v) => names.includes(v.name)).map((v) => v.hostPath?.path);
  const mountsOf = (c: string) => agentPod.containers.find((x) => x.name === c)!.volumeMounts!.map((m) => m.name);
  expect(hostPaths(mountsOf('install-cni'))).toEqual(
    expect.arrayContaining(['/opt/cni/bin', '/etc/cni/net.d', '/var/run/ambient-lab']),
  );
  const agentMounts = agentPod.containers.find((x) => x.name === 'agent')!.volumeMounts!;
  for (const v of ['cni-conf', 'cni-bin']) {
    expect(agentMounts.find((m) => m.name === v)?.readOnly, `agent mount ${v}`).toBe(true);
    expect(mountsOf('install-cni')).toContain(v);
  }
  const netns = agentPod.containers.find((x) => x.name === 'agent')!.volumeMounts!.find((m) => m.name === 'netns')!;
  expect(netns).toMatchObject({ mountPath: '/var/run/netns', mountPropagation: 'HostToContainer' });
  const proxyPaths = (ds('ambient-lab-proxy').spec!.template.spec!.volumes ?? [])
    .map((v) => v.hostPath?.path)
    .filter((p) => p !== undefined);
  expect(proxyPaths).toEqual(['/var/run/ambient-lab']);
});

test('RBAC is least privilege: read pods/namespaces, get nodes, patch only pods/status, create events; the proxy reads pods and policies only', () => {
  const role = (n: string) =>
    (
      docs.find((d) => d.doc.kind === 'ClusterRole' && d.doc.metadata.name === n)!.doc as unknown as {
        rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
      }
    ).rules;
  const grants = (n: string) =>
    role(n)
      .flatMap((r) =>
        r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g || 'core'}/${res}:${v}`))),
      )
      .sort();
  expect(grants('ambient-lab-agent')).toEqual([
    'core/events:create',
    'core/events:patch',
    'core/namespaces:get',
    'core/namespaces:list',
    'core/namespaces:watch',
    'core/nodes:get', // install-cni's exit check: its node's labels against its DaemonSet's required node affinity
    'core/pods/status:patch',
    'core/pods:get',
    'core/pods:list',
    'core/pods:watch',
  ]);
  expect(grants('ambient-lab-proxy')).toEqual([
    'core/pods:get',
    'core/pods:list',
    'core/pods:watch',
    'security.istio.io/authorizationpolicies:get',
    'security.istio.io/authorizationpolicies:list',
    'security.istio.io/authorizationpolicies:watch',
  ]);
  for (const n of ['ambient-lab-agent', 'ambient-lab-proxy']) {
    for (const r of role(n)) expect(r.verbs.includes('*') || r.resources.includes('*'), n).toBe(false);
  }
  // install-cni's exit check: get its own DaemonSet, in its namespace, and nothing else
  const nsRole = docs.find((d) => d.doc.kind === 'Role')!.doc as unknown as {
    metadata: { namespace: string };
    rules: unknown[];
  };
  expect(nsRole.metadata.namespace).toBe('ambient-lab-system');
  expect(nsRole.rules).toEqual([
    { apiGroups: ['apps'], resources: ['daemonsets'], resourceNames: ['ambient-lab-agent'], verbs: ['get'] },
  ]);
  const binding = docs.find((d) => d.doc.kind === 'RoleBinding')!.doc as unknown as { subjects: unknown[] };
  expect(binding.subjects).toEqual([
    { kind: 'ServiceAccount', name: 'ambient-lab-agent', namespace: 'ambient-lab-system' },
  ]);
});

test("the processes agree on paths: the installer's plugin socket default is the agent's; the components use the service account (no kubeconfig)", () => {
  const agent = agentSettings(['--node', 'n1'], {});
  const installer = installerSettings([], {});
  expect(installer.config.pluginFields['agentSocket']).toBe(agent.config.pluginEventAddress);
  for (const d of daemonSets) {
    const pod = d.spec!.template.spec!;
    // in-cluster config needs the token mounted; no init container writes a kubeconfig any more
    expect(pod.automountServiceAccountToken, d.metadata!.name).not.toBe(false);
    expect(pod.initContainers ?? [], d.metadata!.name).toEqual([]);
    for (const c of pod.containers)
      expect(
        c.env?.find((e) => e.name === 'AMBIENT_LAB_KUBECONFIG'),
        `${d.metadata!.name}/${c.name}`,
      ).toBeUndefined();
  }
});

/** A container's environment as the kubelet gives it (fieldRefs resolved for this DaemonSet's pod on node n1). */
function containerEnv(dsName: string, container: string): NodeJS.ProcessEnv {
  const d = ds(dsName);
  const c = d.spec!.template.spec!.containers.find((x) => x.name === container)!;
  const env: NodeJS.ProcessEnv = {};
  for (const e of c.env ?? []) {
    const ref = e.valueFrom?.fieldRef?.fieldPath;
    if (ref === 'metadata.namespace') env[e.name] = d.metadata!.namespace!;
    else if (ref === 'spec.nodeName') env[e.name] = 'n1';
    else if (ref !== undefined) throw new Error(`${dsName}/${container}: fieldRef ${ref} not resolved by this test`);
    else env[e.name] = e.value;
  }
  return env;
}

/** The enrollment config the plugin runs with: what the installer writes, read back the way the plugin reads it. */
function pluginEnrollment(env: NodeJS.ProcessEnv, argv: readonly string[] = []): EnrollmentConfig {
  const fields = installerSettings(argv, env).config.pluginFields;
  return parsePluginConfig({ cniVersion: '1.0.0', name: 'k8s', type: 'ambient-lab-cni', ...fields } as CniNetConf)
    .enrollment;
}

test('one configuration: the agent and the plugin its installer configures decide enrollment from the same settings (manifests, defaults, and one flag changed)', () => {
  const installEnv = containerEnv('ambient-lab-agent', 'install-cni');
  const agentEnv = containerEnv('ambient-lab-agent', 'agent');
  const fromAgent = agentSettings([], agentEnv).config.enrollment;
  expect(fromAgent).toEqual(pluginEnrollment(installEnv));
  // ... and they are the deployment's own names, not upstream's istio-system ones.
  expect(fromAgent).toMatchObject({
    systemNamespace: 'ambient-lab-system',
    excludeNamespaces: ['kube-system'],
    ownPodPrefixes: ['ambient-lab-agent-', 'ambient-lab-proxy-'],
  });
  for (const d of daemonSets)
    expect(
      fromAgent.ownPodPrefixes.some((p) => `${d.metadata!.name}-x7k2p`.startsWith(p)),
      d.metadata!.name,
    ).toBe(true);
  // The two containers name the same settings (a setting on one container only is the disagreement this guards).
  const settingNames = [
    'AMBIENT_LAB_EXCLUDE_NAMESPACES',
    'AMBIENT_LAB_SYSTEM_NAMESPACE',
    'AMBIENT_LAB_OWN_POD_PREFIXES',
  ];
  for (const n of settingNames) expect(agentEnv[n], n).toBe(installEnv[n]);
  // Defaults agree with no settings at all.
  expect(agentSettings(['--node', 'n1'], {}).config.enrollment).toEqual(pluginEnrollment({}));
  // The test can fail: a setting changed on one side only makes them disagree.
  expect(
    agentSettings([], { ...agentEnv, AMBIENT_LAB_EXCLUDE_NAMESPACES: 'kube-system,legacy' }).config.enrollment,
  ).not.toEqual(pluginEnrollment(installEnv));
  expect(agentSettings(['--exclude-namespaces', ' kube-system , legacy ,'], agentEnv).config.enrollment).toEqual(
    pluginEnrollment(installEnv, ['--exclude-namespaces', 'kube-system,legacy']),
  );
});

test("the agent DaemonSet launches with upstream's defaults (IPv6 and DNS capture on), and the proxy serves v6 and DNS to match", () => {
  const agent = agentSettings([], containerEnv('ambient-lab-agent', 'agent')).config;
  expect(agent).toMatchObject({ ipv6: true, dnsCapture: true, profile: 'upstream' });
  // the flags' own defaults are the same (the manifest only says them out loud)
  expect(agentSettings(['--node', 'n1'], {}).config).toMatchObject({ ipv6: true, dnsCapture: true });
  const proxyEnv = containerEnv('ambient-lab-proxy', 'proxy');
  expect(proxyEnv['AMBIENT_LAB_IPV6']).toBe('true');
  expect(proxyEnv['AMBIENT_LAB_PROFILE']).toBe('upstream'); // the agent's profile (profile-strict changes both)
  expect(proxyEnv['AMBIENT_LAB_DNS_UPSTREAM']).toBe('resolv.conf');
  expect(ds('ambient-lab-proxy').spec!.template.spec!.dnsPolicy).toBe('ClusterFirstWithHostNet'); // resolv.conf names the cluster DNS
});

test('ZDS access: the proxy runs non-root; the agent admits exactly its uid and gives the socket its group, as a member of that group', () => {
  const proxyPod = ds('ambient-lab-proxy').spec!.template.spec!;
  const proxy = proxyPod.containers.find((c) => c.name === 'proxy')!.securityContext!;
  expect(proxy.runAsUser).toBeGreaterThan(0);
  expect(proxy.runAsNonRoot).toBe(true);
  const agentPod = ds('ambient-lab-agent').spec!.template.spec!;
  const agentEnv = agentPod.containers.find((c) => c.name === 'agent')!.env!;
  const env = (n: string): string | undefined => agentEnv.find((e) => e.name === n)?.value;
  expect(env('AMBIENT_LAB_PROXY_UID')).toBe(String(proxy.runAsUser));
  expect(env('AMBIENT_LAB_ALLOWED_PROXY_UIDS')).toBeUndefined(); // defaults to the proxy uid alone
  expect(env('AMBIENT_LAB_ZDS_SOCKET_GROUP')).toBe(String(proxy.runAsGroup));
  expect(env('AMBIENT_LAB_ZDS_SOCKET_MODE')).toBeUndefined(); // 0660 with a group: owner and group only
  expect(env('AMBIENT_LAB_ZDS_SOCKET_OWNER')).toBeUndefined(); // chown to another uid would need CAP_CHOWN
  expect(agentPod.securityContext?.supplementalGroups).toEqual([proxy.runAsGroup]);
  // the image's file capabilities are exactly the capabilities the DaemonSet adds
  const dockerfile = readFileSync(path.join(REPO, 'ci/proxy.Dockerfile'), 'utf8');
  const setcap = /setcap ([a-z_,]+)\+ep \/app\/node-netcaps/.exec(dockerfile)?.[1];
  expect(
    setcap
      ?.split(',')
      .map((c) => c.replace(/^cap_/, '').toUpperCase())
      .sort(),
  ).toEqual([...proxyPodCaps(proxyPod)].sort());
  expect(/^USER (\d+):(\d+)$/m.exec(dockerfile)?.slice(1).map(Number)).toEqual([proxy.runAsUser, proxy.runAsGroup]);
});

function proxyPodCaps(pod: NonNullable<IDaemonSet['spec']>['template']['spec']): readonly string[] {
  return pod!.containers.find((c) => c.name === 'proxy')!.securityContext!.capabilities!.add ?? [];
}

test('the proxy DaemonSet starts node with the proxy V8 flags every other launcher uses (impl/linux/node-flags.ts)', () => {
  const proxy = daemonSets
    .find((d) => d.metadata!.name === 'ambient-lab-proxy')!
    .spec!.template.spec!.containers.find((c) => c.name === 'proxy')!;
  expect(proxy.command).toEqual(['/app/node-netcaps', ...PROXY_NODE_FLAGS, '/app/bin/ambient-lab-proxy.js']);
});

test('Pod Security: the namespace enforces privileged (the DaemonSets need host namespaces, host paths and capabilities)', () => {
  const ns = docs.find((d) => d.doc.kind === 'Namespace')!.doc as unknown as {
    metadata: { labels: Record<string, string> };
  };
  expect(ns.metadata.labels['pod-security.kubernetes.io/enforce']).toBe('privileged');
});

test("AppArmor: the agent pod's containers run unconfined, as upstream istio-cni's install-cni; the proxy keeps the runtime's profile", () => {
  const profile = (d: string, c: string) =>
    ds(d).spec!.template.spec!.containers.find((x) => x.name === c)!.securityContext?.appArmorProfile;
  expect(profile('ambient-lab-agent', 'agent')).toEqual({ type: 'Unconfined' });
  expect(profile('ambient-lab-agent', 'install-cni')).toEqual({ type: 'Unconfined' });
  expect(profile('ambient-lab-proxy', 'proxy')).toBeUndefined();
});

test("readiness and liveness: the agent's readiness checks the CNI dirs install-cni writes; the proxy has a liveness probe on /healthz", () => {
  const agentPod = ds('ambient-lab-agent').spec!.template.spec!;
  const c = (n: string) => agentPod.containers.find((x) => x.name === n)!;
  const env = agentSettings([], containerEnv('ambient-lab-agent', 'agent'));
  const mountOf = (container: string, volume: string) =>
    c(container).volumeMounts!.find((m) => m.name === volume)!.mountPath;
  // the agent looks where install-cni writes (the same volumes, the same paths)
  expect(env.installCheck).toEqual({
    cniBinDir: mountOf('install-cni', 'cni-bin'),
    cniConfDir: mountOf('install-cni', 'cni-conf'),
  });
  expect(env.installCheck?.cniBinDir).toBe(mountOf('agent', 'cni-bin'));
  expect(env.installCheck?.cniConfDir).toBe(mountOf('agent', 'cni-conf'));
  expect(installerSettings([], containerEnv('ambient-lab-agent', 'install-cni')).config).toMatchObject({
    cniBinDir: env.installCheck?.cniBinDir,
    cniConfDir: env.installCheck?.cniConfDir,
  });
  // the probes reach the ports the agent's own settings give it (upstream istio-cni's 8000)
  expect(env.readinessPort).toBe(8000);
  expect(c('agent').readinessProbe?.httpGet).toMatchObject({ path: '/readyz', port: env.readinessPort });
  expect(c('agent').livenessProbe?.httpGet).toMatchObject({ path: '/healthz', port: env.readinessPort });
  const proxy = ds('ambient-lab-proxy').spec!.template.spec!.containers.find((x) => x.name === 'proxy')!;
  expect(proxy.readinessProbe?.httpGet).toMatchObject({ path: '/healthz/ready', port: 15021 });
  expect(proxy.livenessProbe?.httpGet).toMatchObject({ path: '/healthz', port: 15021 });
});

test('Prometheus: both DaemonSets carry the prometheus.io scrape annotations for their metrics port (15014, 15020, as upstream) and name the port', () => {
  const env = agentSettings([], containerEnv('ambient-lab-agent', 'agent'));
  for (const [name, container, port] of [
    ['ambient-lab-agent', 'agent', env.metricsPort],
    ['ambient-lab-proxy', 'proxy', 15020],
  ] as const) {
    const t = ds(name).spec!.template;
    expect(t.metadata?.annotations).toMatchObject({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': String(port),
      'prometheus.io/path': '/metrics',
    });
    const ports = t.spec!.containers.find((x) => x.name === container)!.ports ?? [];
    expect(ports.map((p) => p.containerPort)).toContain(port);
  }
  expect(env.metricsPort).toBe(15014);
});

test('one mesh root, its key in the CA only: the CA mounts the Secret (its group only); the proxy mounts the root certificate and a CA-audience token', () => {
  const pod = ds('ambient-lab-proxy').spec!.template.spec!;
  const proxy = pod.containers.find((x) => x.name === 'proxy')!;
  const env = containerEnv('ambient-lab-proxy', 'proxy');
  // the proxy: no Secret at all, the root certificate from the ConfigMap, a bound token for the CA
  expect(pod.volumes!.filter((v) => v.secret !== undefined)).toEqual([]);
  const cert = pod.volumes!.find((v) => v.configMap !== undefined)!;
  expect(cert.configMap).toEqual({ name: 'ambient-lab-mesh-root-cert' });
  expect(env['AMBIENT_LAB_CA_ROOT']).toBe(`${proxy.volumeMounts!.find((m) => m.name === cert.name)!.mountPath}/ca.crt`);
  const token = pod.volumes!.find((v) => v.projected !== undefined)!;
  expect(token.projected!.sources).toEqual([
    { serviceAccountToken: { audience: 'istio-ca', expirationSeconds: 43200, path: 'istio-token' } },
  ]);
  expect(env['AMBIENT_LAB_TOKEN_FILE']).toBe(
    `${proxy.volumeMounts!.find((m) => m.name === token.name)!.mountPath}/istio-token`,
  );
  expect(env['AMBIENT_LAB_CA_ADDRESS']).toBe('https://ambient-lab-ca.ambient-lab-system.svc:15012');
  expect(env['AMBIENT_LAB_CA_KEY']).toBeUndefined();
  // the CA: the Secret, mode 0440, readable through its fsGroup = its own group; served by the Service the proxies name
  const dep = docs.find((d) => d.doc.kind === 'Deployment' && d.doc.metadata.name === 'ambient-lab-ca')!
    .doc as unknown as IDeployment;
  const caPod = dep.spec!.template.spec!;
  const ca = caPod.containers.find((x) => x.name === 'ca')!;
  const caEnv = Object.fromEntries((ca.env ?? []).map((e) => [e.name, e.value]));
  const vol = caPod.volumes!.find((v) => v.secret !== undefined)!;
  expect(vol.secret).toEqual({ secretName: 'ambient-lab-mesh-root', defaultMode: 0o440 });
  const mount = ca.volumeMounts!.find((m) => m.name === vol.name)!;
  expect(mount.readOnly).toBe(true);
  expect(caEnv['AMBIENT_LAB_CA_CERT']).toBe(`${mount.mountPath}/ca.crt`);
  expect(caEnv['AMBIENT_LAB_CA_KEY']).toBe(`${mount.mountPath}/ca.key`);
  expect(caPod.securityContext?.fsGroup).toBe(ca.securityContext!.runAsGroup);
  expect(ca.securityContext!.runAsGroup).not.toBe(proxy.securityContext!.runAsGroup);
  expect(caEnv['AMBIENT_LAB_DNS_NAMES']).toBe('ambient-lab-ca.ambient-lab-system.svc');
  const svc = docs.find((d) => d.doc.kind === 'Service' && d.doc.metadata.name === 'ambient-lab-ca')!
    .doc as unknown as {
    spec: { ports: { port: number }[] };
  };
  expect(svc.spec.ports.map((p) => p.port)).toEqual([15012]);
  // no mesh root in the repository: the Secret and the ConfigMap are made at install time
  expect(docs.filter((d) => d.doc.kind === 'Secret' || d.doc.kind === 'ConfigMap')).toEqual([]);
});

test("install-cni removes the plugin at exit only when its own DaemonSet is gone (upstream's safe upgrade), and looks up the DaemonSet that runs it", () => {
  const s = installerSettings([], containerEnv('ambient-lab-agent', 'install-cni'));
  expect(s.uninstallOnExit).toBe('when-daemonset-gone');
  const agentDs = ds('ambient-lab-agent');
  expect(s.owner).toEqual({ namespace: agentDs.metadata!.namespace, name: agentDs.metadata!.name });
  // the binary's own default leaves the plugin in place (an installer outside Kubernetes has no DaemonSet)
  expect(installerSettings([], {}).uninstallOnExit).toBe('never');
});
