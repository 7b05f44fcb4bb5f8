/**
 * How the deployment launches the node agent, the node proxy and the mesh CA, read from the rendered
 * manifests: deploy/ is a Kustomize base (profile upstream: IPv6 and DNS capture on, as upstream's
 * charts) with components that change the profile, IPv6 or DNS capture; `kubectl kustomize`
 * renders them (renderKustomization, renderDeployment) and deploymentLaunch reads the rendered
 * stream: user, group, supplementary groups, capabilities, the Node.js flags and program of each
 * container, and its environment. Every world that starts the components derives their launch
 * from this one loader (the netns world and `up` start processes from it; the kind world applies
 * the same rendered stream), so what runs is what ships.
 *
 * Only what a process launch can mean is read; anything the loader cannot follow (an env value
 * from a secret, a command that is not `node … /app/<script>`) is an error naming the field,
 * never a silent default. No renderer of our own: without kubectl (>= 1.27, kustomize 5) rendering
 * fails with a message saying how to install it, and callers skip with kubectlAvailability().
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { Backend } from '../../impl/api/backend.js';
import type { Profile } from '../../impl/api/profile.js';
import { agentSettings } from '../../impl/linux/node-agent-config.js';

/** The repository's deploy/ directory (base, components, overlays, crd), from source or from dist/. */
export function deployDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (fs.existsSync(path.join(dir, 'deploy', 'base', 'kustomization.yaml'))) return path.join(dir, 'deploy');
    dir = path.dirname(dir);
  }
  throw new Error(
    'deployment: cannot find deploy/base/kustomization.yaml above e2e/deployment (a repository checkout)',
  );
}

/** How to get a kubectl that renders deploy/ (its kustomize must know components: kustomize >= 4). */
const KUBECTL_HINT =
  "install kubectl >= 1.27 (its built-in kustomize renders deploy/): Debian bookworm's kubernetes-client package (1.20, kustomize 2) is too old — " +
  'use the Kubernetes apt repository (pkgs.k8s.io, package kubectl) or the kubectl binary from dl.k8s.io';

/** Whether `kubectl kustomize` can render deploy/ here; the reason when not (tests skip with it). */
export function kubectlAvailability(env: NodeJS.ProcessEnv = process.env): {
  readonly ok: boolean;
  readonly reason: string;
} {
  let out: string;
  try {
    out = execFileSync('kubectl', ['version', '--client', '-o', 'json'], {
      env,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const why = err.code === 'ENOENT' ? 'kubectl is not on PATH' : `kubectl version failed: ${err.message}`;
    return { ok: false, reason: `rendering the deployment (deploy/) needs kubectl: ${why}; ${KUBECTL_HINT}` };
  }
  let v: unknown;
  try {
    v = (JSON.parse(out) as { kustomizeVersion?: unknown }).kustomizeVersion;
  } catch {
    v = undefined;
  }
  const major = typeof v === 'string' ? Number(/^v?(\d+)\./.exec(v)?.[1]) : NaN;
  if (!(major >= 4))
    return {
      ok: false,
      reason: `rendering the deployment (deploy/) needs kustomize >= 4 (components) in kubectl; this kubectl has ${typeof v === 'string' ? `kustomize ${v}` : 'no kustomize version'}; ${KUBECTL_HINT}`,
    };
  return { ok: true, reason: '' };
}

/** `kubectl kustomize DIR` (kubectl from env's PATH): the rendered manifest stream. Throws naming the directory and what to do. */
export function renderKustomization(dir: string, env: NodeJS.ProcessEnv = process.env): string {
  try {
    return execFileSync('kubectl', ['kustomize', dir], {
      env,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { stderr?: string };
    if (err.code === 'ENOENT')
      throw new Error(`deployment: cannot render ${dir}: kubectl is not on PATH; ${KUBECTL_HINT}`, { cause: e });
    throw new Error(
      `deployment: kubectl kustomize ${dir} failed: ${(err.stderr ?? err.message).trim()} (check the kustomization; with an old kubectl: ${KUBECTL_HINT})`,
      { cause: e },
    );
  }
}

/** The settings the deploy/ components choose; the base is { upstream, ipv6: true, dnsCapture: true, iptables }. */
export interface DeploymentChoice {
  readonly profile: Profile;
  readonly ipv6: boolean;
  readonly dnsCapture: boolean;
  /** Absent: iptables (the base). */
  readonly backend?: Backend;
}

/** The components of deploy/components/ that make `choice` from the base. */
function deploymentComponents(choice: DeploymentChoice): string[] {
  return [
    ...(choice.profile === 'strict' ? ['profile-strict'] : []),
    ...(choice.ipv6 ? [] : ['ipv6-off']),
    ...(choice.dnsCapture ? [] : ['dns-capture-off']),
    ...(choice.backend === 'nftables' ? ['backend-nftables'] : []),
  ];
}

/**
 * Render deploy/ for `choice`: the base alone, or a kustomization (in a temporary directory, as a
 * user would write one) listing the base and the components — the same files the overlays use.
 */
export function renderDeployment(choice: DeploymentChoice): string {
  const deploy = deployDir();
  const components = deploymentComponents(choice);
  if (components.length === 0) return renderKustomization(path.join(deploy, 'base'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-kustomize-'));
  try {
    // kustomize takes only relative paths to other kustomizations
    const rel = (p: string) => path.relative(dir, p);
    fs.writeFileSync(
      path.join(dir, 'kustomization.yaml'),
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        'resources:',
        `  - ${rel(path.join(deploy, 'base'))}`,
        'components:',
        ...components.map((c) => `  - ${rel(path.join(deploy, 'components', c))}`),
        '',
      ].join('\n'),
    );
    return renderKustomization(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** One container's launch, as the manifests say it. */
interface ContainerLaunch {
  /** DaemonSet/container, for error messages. */
  readonly source: string;
  readonly uid: number;
  readonly gid: number;
  /** The pod's supplementalGroups (Kubernetes adds them to every container's process). */
  readonly groups: readonly number[];
  /** Capabilities added after `drop: [ALL]`, lower case without `cap_` (setpriv's spelling). */
  readonly caps: readonly string[];
  /** Node.js flags between the node binary and the program. */
  readonly nodeFlags: readonly string[];
  /** The program, relative to the repository (the image's /app). */
  readonly program: string;
  /** Literal env values and resolved field references (metadata.namespace, spec.nodeName). */
  readonly env: Readonly<Record<string, string>>;
  /** The command's first element (`node`, or the image's `/app/node-netcaps`): a container world runs it as written. */
  readonly binary: string;
  /** Command elements after the program (e.g. the installer's `install`). */
  readonly programArgs: readonly string[];
  /** What a container runtime applies besides the process's credentials (a container world follows these). */
  readonly pod: {
    readonly hostNetwork: boolean;
    readonly hostPID: boolean;
    readonly serviceAccount: string;
    /** The workload's namespace (the service account's; what a pod's mounted `namespace` file says). */
    readonly namespace: string;
  };
  /** securityContext.allowPrivilegeEscalation: false is no_new_privs (it blocks file capabilities). */
  readonly allowPrivilegeEscalation: boolean;
  readonly readOnlyRootFilesystem: boolean;
  /** The container's hostPath volume mounts (volume kinds other than hostPath and secret are an error: a launch cannot follow them). */
  readonly hostPathMounts: readonly HostPathMount[];
  /** The container's secret volume mounts (e.g. the CA's mesh root): a world places the Secret's files there. */
  readonly secretMounts: readonly SecretMount[];
  /** The container's configMap volume mounts (e.g. the proxy's root certificate). */
  readonly configMapMounts: readonly ConfigMapMount[];
  /** The container's projected service-account tokens (e.g. the proxy's istio-token for the CA): a world mints one per pod. */
  readonly tokenMounts: readonly TokenMount[];
}

interface ConfigMapMount {
  readonly configMapName: string;
  readonly mountPath: string;
  readonly defaultMode: number;
}

interface TokenMount {
  /** The directory mounted; the token is `path` in it. */
  readonly mountPath: string;
  readonly path: string;
  readonly audience: string;
  readonly expirationSeconds: number;
}

interface SecretMount {
  readonly secretName: string;
  readonly mountPath: string;
  /** The volume's defaultMode (Kubernetes' default 0644). */
  readonly defaultMode: number;
  readonly readOnly: boolean;
}

interface HostPathMount {
  readonly hostPath: string;
  readonly mountPath: string;
  /** mountPropagation: HostToContainer is rslave; absent/None is private. */
  readonly propagation: 'None' | 'HostToContainer';
}

interface DeploymentLaunch {
  readonly agent: ContainerLaunch;
  /** The agent DaemonSet's CNI installer container (it installs and chains the plugin on the node). */
  readonly installCni: ContainerLaunch;
  readonly proxy: ContainerLaunch;
  /** The mesh CA Deployment's container. */
  readonly ca: ContainerLaunch;
}

/** Where the image keeps the repository's build (ci/*.Dockerfile: WORKDIR /app). */
const IMAGE_APP_DIR = '/app/';

/** The field references a launch may use, with the value a kubelet would give on `node`. */
interface FieldValues {
  readonly nodeName: string;
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A DaemonSet of a rendered stream, as its manifest says it (JSON of the YAML document). */
export interface RenderedDaemonSet {
  readonly apiVersion: string;
  readonly kind: 'DaemonSet';
  readonly metadata: { readonly name: string; readonly namespace: string; readonly [k: string]: unknown };
  readonly [k: string]: unknown;
}

/**
 * The DaemonSets of a rendered manifest stream, in stream order: what `kubectl apply` of it would
 * create (a lab creates them in its API, so the installer's DaemonSet lookup finds its owner).
 * Throws, naming `source`, when the stream is not valid YAML or a DaemonSet has no name or namespace.
 */
export function deploymentDaemonSets(rendered: string, source = 'the rendered deployment'): RenderedDaemonSet[] {
  return deploymentWorkloads(rendered, source, 'DaemonSet') as RenderedDaemonSet[];
}

/** The objects of `kind` in a rendered stream, in stream order; each must have a name and a namespace. */
function deploymentWorkloads(
  rendered: string,
  source: string,
  kind: 'DaemonSet' | 'Deployment',
): Array<{ readonly metadata: { readonly name: string; readonly namespace: string } } & Obj> {
  const out: Array<{ readonly metadata: { readonly name: string; readonly namespace: string } } & Obj> = [];
  for (const doc of parseAllDocuments(rendered)) {
    if (doc.errors.length > 0)
      throw new Error(`deployment launch: ${source} is not valid YAML: ${doc.errors[0]!.message}`);
    const o: unknown = doc.toJS();
    if (!isObj(o) || o['kind'] !== kind) continue;
    const meta = o['metadata'];
    if (!isObj(meta) || typeof meta['name'] !== 'string' || typeof meta['namespace'] !== 'string')
      throw new Error(`deployment launch: ${source}: a ${kind} without metadata.name and metadata.namespace`);
    out.push(o as { readonly metadata: { readonly name: string; readonly namespace: string } } & Obj);
  }
  return out;
}

/**
 * Read the agent's and the proxy's launch from a rendered manifest stream (renderDeployment,
 * renderKustomization, or a file of their output); `source` names it in errors. Throws, naming
 * the source and field, when a DaemonSet is missing, malformed or says something a launch cannot
 * follow.
 */
export function deploymentLaunch(
  rendered: string,
  fields: FieldValues & { readonly source?: string },
): DeploymentLaunch {
  const source = fields.source ?? 'the rendered deployment';
  const workloads = new Map<string, Obj>();
  for (const ds of deploymentDaemonSets(rendered, source)) workloads.set(`DaemonSet/${ds.metadata.name}`, ds);
  for (const d of deploymentWorkloads(rendered, source, 'Deployment'))
    workloads.set(`Deployment/${d.metadata.name}`, d);
  const take = (kind: 'DaemonSet' | 'Deployment', name: string, container: string): ContainerLaunch => {
    const found = workloads.get(`${kind}/${name}`);
    if (!found)
      throw new Error(
        `deployment launch: no ${kind} ${name} in ${source}; the rendered manifests are the source of the components' launch`,
      );
    return containerLaunch(source, found, container, fields);
  };
  return {
    agent: take('DaemonSet', 'ambient-lab-agent', 'agent'),
    installCni: take('DaemonSet', 'ambient-lab-agent', 'install-cni'),
    proxy: take('DaemonSet', 'ambient-lab-proxy', 'proxy'),
    ca: take('Deployment', 'ambient-lab-ca', 'ca'),
  };
}

function containerLaunch(file: string, ds: Obj, name: string, fields: FieldValues): ContainerLaunch {
  const where = `${file}: ${String(ds['kind'])} ${String((ds['metadata'] as Obj)['name'])}, container ${name}`;
  const fail = (what: string): never => {
    throw new Error(`deployment launch: ${where}: ${what}`);
  };
  const podSpec = pathOf(ds, ['spec', 'template', 'spec']);
  if (!isObj(podSpec)) return fail('no spec.template.spec');
  const containers = podSpec['containers'];
  const c = Array.isArray(containers) ? containers.find((x: unknown) => isObj(x) && x['name'] === name) : undefined;
  if (!isObj(c)) return fail('no such container');
  const podSc = isObj(podSpec['securityContext']) ? podSpec['securityContext'] : {};
  const sc = isObj(c['securityContext']) ? c['securityContext'] : {};
  const id = (field: string, v: unknown): number => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xfffffffe)
      return fail(`${field} must be a numeric id, got ${JSON.stringify(v)}`);
    return v;
  };
  // Container settings win over the pod's, as Kubernetes applies them.
  const uid = id('runAsUser', sc['runAsUser'] ?? podSc['runAsUser']);
  const gidRaw = sc['runAsGroup'] ?? podSc['runAsGroup'];
  // Without runAsGroup a container runs with its image's group; our images set none, so gid 0 (root's group), as the runtime does.
  const gid = gidRaw === undefined ? 0 : id('runAsGroup', gidRaw);
  const groupsRaw = podSc['supplementalGroups'] ?? [];
  if (!Array.isArray(groupsRaw)) return fail('securityContext.supplementalGroups must be a list');
  const groups = groupsRaw.map((g: unknown) => id('supplementalGroups[]', g));
  const capsSc = sc['capabilities'];
  if (!isObj(capsSc) || !Array.isArray(capsSc['drop']) || !capsSc['drop'].includes('ALL')) {
    return fail(
      'capabilities must drop ALL and add back what the container needs (a launch cannot follow a default set)',
    );
  }
  const add = capsSc['add'] ?? [];
  if (!Array.isArray(add)) return fail('capabilities.add must be a list');
  const caps = add.map((x: unknown) => {
    if (typeof x !== 'string' || !/^[A-Z_]+$/.test(x))
      return fail(`capabilities.add: ${JSON.stringify(x)} is not a capability name`);
    return x.replace(/^CAP_/, '').toLowerCase();
  });
  const command = c['command'];
  if (!Array.isArray(command) || command.length < 2 || !command.every((x: unknown) => typeof x === 'string'))
    return fail('command must be [node, flags..., /app/<program>]');
  const argv = command as string[];
  // [binary, node flags..., /app/<program>, program args...]: the program is the first element
  // after the binary under the image's /app (the binary itself may be there: /app/node-netcaps).
  const programAt = argv.findIndex((x, i) => i > 0 && x.startsWith(IMAGE_APP_DIR));
  if (programAt < 0) return fail(`the program ${JSON.stringify(argv[argv.length - 1])} is not under ${IMAGE_APP_DIR}`);
  const program = argv[programAt]!;
  const programArgs = argv.slice(programAt + 1);
  for (const a of programArgs)
    if (a.startsWith('-'))
      return fail(`${JSON.stringify(a)} after the program: flags are not followed (settings come from env)`);
  const nodeFlags = argv.slice(1, programAt);
  for (const f of nodeFlags)
    if (!f.startsWith('--'))
      return fail(`${JSON.stringify(f)} between the node binary and the program is not a Node.js flag`);
  if (Array.isArray(c['args']) && c['args'].length > 0)
    return fail('args are not followed yet (settings come from env)');
  const env: Record<string, string> = {};
  for (const e of Array.isArray(c['env']) ? c['env'] : []) {
    if (!isObj(e) || typeof e['name'] !== 'string') return fail('env entries need a name');
    const n = e['name'];
    if (typeof e['value'] === 'string') env[n] = e['value'];
    // neither value nor valueFrom: the empty string, as Kubernetes sets it (kustomize renders value: "" so)
    else if (e['value'] === undefined && e['valueFrom'] === undefined) env[n] = '';
    else
      env[n] =
        fieldValue(pathOf(e, ['valueFrom', 'fieldRef', 'fieldPath']), ds, fields) ??
        fail(`env ${n}: only literal values and fieldRef metadata.namespace / spec.nodeName can be followed`);
  }
  const volumes = new Map<string, Obj>();
  for (const v of Array.isArray(podSpec['volumes']) ? podSpec['volumes'] : [])
    if (isObj(v) && typeof v['name'] === 'string') volumes.set(v['name'], v);
  const hostPathMounts: HostPathMount[] = [];
  const secretMounts: SecretMount[] = [];
  const configMapMounts: ConfigMapMount[] = [];
  const tokenMounts: TokenMount[] = [];
  const fileMode = (v: string, mode: unknown): number => {
    if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o777)
      return fail(`volume ${v}: defaultMode must be a file mode, got ${JSON.stringify(mode)}`);
    return mode;
  };
  for (const m of Array.isArray(c['volumeMounts']) ? c['volumeMounts'] : []) {
    if (!isObj(m) || typeof m['name'] !== 'string' || typeof m['mountPath'] !== 'string')
      return fail('volumeMounts entries need a name and a mountPath');
    const volume = volumes.get(m['name']) ?? {};
    const secret = volume['secret'];
    if (isObj(secret)) {
      const secretName = secret['secretName'];
      if (typeof secretName !== 'string') return fail(`volume ${m['name']}: secret.secretName must be a string`);
      const mode = secret['defaultMode'] ?? 0o644;
      if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o777)
        return fail(`volume ${m['name']}: secret.defaultMode must be a file mode, got ${JSON.stringify(mode)}`);
      if (m['mountPropagation'] !== undefined && m['mountPropagation'] !== 'None')
        return fail(`volumeMount ${m['name']}: mountPropagation on a secret volume is not followed`);
      // Kubernetes mounts secret volumes read-only whatever the mount says.
      secretMounts.push({ secretName, mountPath: m['mountPath'], defaultMode: mode, readOnly: true });
      continue;
    }
    const configMap = volume['configMap'];
    if (isObj(configMap)) {
      if (typeof configMap['name'] !== 'string') return fail(`volume ${m['name']}: configMap.name must be a string`);
      if (configMap['items'] !== undefined) return fail(`volume ${m['name']}: configMap.items are not followed`);
      configMapMounts.push({
        configMapName: configMap['name'],
        mountPath: m['mountPath'],
        defaultMode: fileMode(m['name'], configMap['defaultMode'] ?? 0o644),
      });
      continue;
    }
    const projected = volume['projected'];
    if (isObj(projected)) {
      const sources = projected['sources'];
      const token =
        Array.isArray(sources) && sources.length === 1 ? pathOf(sources[0] as Obj, ['serviceAccountToken']) : undefined;
      if (!isObj(token) || typeof token['path'] !== 'string' || typeof token['audience'] !== 'string')
        return fail(
          `volume ${m['name']}: a projected volume is followed only as one serviceAccountToken with an audience and a path`,
        );
      const ttl = token['expirationSeconds'] ?? 3600;
      if (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 600)
        return fail(`volume ${m['name']}: serviceAccountToken.expirationSeconds must be an integer >= 600`);
      tokenMounts.push({
        mountPath: m['mountPath'],
        path: token['path'],
        audience: token['audience'],
        expirationSeconds: ttl,
      });
      continue;
    }
    const hostPath = pathOf(volume, ['hostPath', 'path']);
    if (typeof hostPath !== 'string')
      return fail(`volume ${m['name']} is none of hostPath, secret, configMap or a projected token`);
    const prop = m['mountPropagation'] ?? 'None';
    if (prop !== 'None' && prop !== 'HostToContainer')
      return fail(`volumeMount ${m['name']}: mountPropagation ${JSON.stringify(prop)} is not followed`);
    hostPathMounts.push({ hostPath, mountPath: m['mountPath'], propagation: prop });
  }
  const flag = (field: string, v: unknown, dflt: boolean): boolean => {
    if (v === undefined) return dflt;
    if (typeof v !== 'boolean') return fail(`${field} must be true or false, got ${JSON.stringify(v)}`);
    return v;
  };
  return {
    source: `${file} ${name}`,
    uid,
    gid,
    groups,
    caps,
    nodeFlags,
    program: program.slice(IMAGE_APP_DIR.length),
    env,
    binary: argv[0]!,
    programArgs,
    pod: {
      hostNetwork: flag('hostNetwork', podSpec['hostNetwork'], false),
      hostPID: flag('hostPID', podSpec['hostPID'], false),
      serviceAccount: typeof podSpec['serviceAccountName'] === 'string' ? podSpec['serviceAccountName'] : 'default',
      namespace: fieldValue('metadata.namespace', ds, fields) ?? 'default',
    },
    // Kubernetes' default is true (unless the container drops privileges by other means).
    allowPrivilegeEscalation: flag('allowPrivilegeEscalation', sc['allowPrivilegeEscalation'], true),
    readOnlyRootFilesystem: flag('readOnlyRootFilesystem', sc['readOnlyRootFilesystem'], false),
    hostPathMounts,
    secretMounts,
    configMapMounts,
    tokenMounts,
  };
}

function fieldValue(fieldPath: unknown, ds: Obj, fields: FieldValues): string | undefined {
  if (fieldPath === 'spec.nodeName') return fields.nodeName;
  if (fieldPath === 'metadata.namespace') {
    const ns = (ds['metadata'] as Obj)['namespace'];
    return typeof ns === 'string' ? ns : undefined;
  }
  return undefined;
}

function pathOf(o: Obj, keys: readonly string[]): unknown {
  let cur: unknown = o;
  for (const k of keys) cur = isObj(cur) ? cur[k] : undefined;
  return cur;
}

/**
 * What a rendered deployment chose (profile, IPv6 capture, DNS capture), read the way the agent
 * reads its environment; the proxy's IPv6 and profile must agree with the agent's (the components
 * change both together), or this throws naming the two values.
 */
export function deploymentChoiceOf(l: DeploymentLaunch): DeploymentChoice {
  const c = agentSettings([], l.agent.env).config;
  const proxyIpv6 = l.proxy.env['AMBIENT_LAB_IPV6'] ?? 'true';
  if (proxyIpv6 !== String(c.ipv6))
    throw new Error(
      `deployment: the agent's AMBIENT_LAB_IPV6 is ${String(c.ipv6)} but the proxy's is ${proxyIpv6}: v6 capture and v6 listeners go together (deploy/components/ipv6-off changes both)`,
    );
  const proxyProfile = l.proxy.env['AMBIENT_LAB_PROFILE'] ?? 'upstream';
  if (proxyProfile !== c.profile)
    throw new Error(
      `deployment: the agent's AMBIENT_LAB_PROFILE is ${c.profile} but the proxy's is ${proxyProfile}: the proxy's outbound choices follow the profile (deploy/components/profile-strict changes both)`,
    );
  return {
    profile: c.profile,
    ipv6: c.ipv6,
    dnsCapture: c.dnsCapture,
    ...(c.backend === 'nftables' ? { backend: c.backend } : {}),
  };
}
