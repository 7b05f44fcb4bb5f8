/**
 * How the deployment launches the node agent and the node proxy, read from the manifests
 * (fixtures/manifests): user, group, supplementary groups, capabilities, the Node.js flags and
 * program of each container, and its environment. A world that starts the components as
 * processes (the netns world, `up`) derives their launch from this, so it runs what ships.
 *
 * Only what a process launch can mean is read; anything the loader cannot follow (an env value
 * from a secret, a command that is not `node … /app/<script>`) is an error naming the field,
 * never a silent default.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';

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
    /** The DaemonSet's namespace (the service account's; what a pod's mounted `namespace` file says). */
    readonly namespace: string;
  };
  /** securityContext.allowPrivilegeEscalation: false is no_new_privs (it blocks file capabilities). */
  readonly allowPrivilegeEscalation: boolean;
  readonly readOnlyRootFilesystem: boolean;
  /** The container's hostPath volume mounts (other volume kinds are an error: a launch cannot follow them). */
  readonly hostPathMounts: readonly HostPathMount[];
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

/**
 * Read the agent's and the proxy's launch from the manifests in `dir`. Throws, naming the file
 * and field, when a manifest is missing, malformed or says something a launch cannot follow.
 */
export function deploymentLaunch(dir: string, fields: FieldValues): DeploymentLaunch {
  const daemonSets = new Map<string, { file: string; ds: Obj }>();
  for (const file of fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()) {
    const full = path.join(dir, file);
    for (const doc of parseAllDocuments(fs.readFileSync(full, 'utf8'))) {
      if (doc.errors.length > 0)
        throw new Error(`deployment launch: ${full} is not valid YAML: ${doc.errors[0]!.message}`);
      const o: unknown = doc.toJS();
      if (isObj(o) && o['kind'] === 'DaemonSet' && isObj(o['metadata']))
        daemonSets.set(String(o['metadata']['name']), { file: full, ds: o });
    }
  }
  const take = (name: string, container: string): ContainerLaunch => {
    const found = daemonSets.get(name);
    if (!found)
      throw new Error(
        `deployment launch: no DaemonSet ${name} in ${dir}; the manifests are the source of the components' launch`,
      );
    return containerLaunch(found.file, found.ds, container, fields);
  };
  return {
    agent: take('ambient-lab-agent', 'agent'),
    installCni: take('ambient-lab-agent', 'install-cni'),
    proxy: take('ambient-lab-proxy', 'proxy'),
  };
}

function containerLaunch(file: string, ds: Obj, name: string, fields: FieldValues): ContainerLaunch {
  const where = `${file}: DaemonSet ${String((ds['metadata'] as Obj)['name'])}, container ${name}`;
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
    else
      env[n] =
        fieldValue(pathOf(e, ['valueFrom', 'fieldRef', 'fieldPath']), ds, fields) ??
        fail(`env ${n}: only literal values and fieldRef metadata.namespace / spec.nodeName can be followed`);
  }
  const volumes = new Map<string, Obj>();
  for (const v of Array.isArray(podSpec['volumes']) ? podSpec['volumes'] : [])
    if (isObj(v) && typeof v['name'] === 'string') volumes.set(v['name'], v);
  const hostPathMounts: HostPathMount[] = [];
  for (const m of Array.isArray(c['volumeMounts']) ? c['volumeMounts'] : []) {
    if (!isObj(m) || typeof m['name'] !== 'string' || typeof m['mountPath'] !== 'string')
      return fail('volumeMounts entries need a name and a mountPath');
    const hostPath = pathOf(volumes.get(m['name']) ?? {}, ['hostPath', 'path']);
    if (typeof hostPath !== 'string') return fail(`volume ${m['name']} is not a hostPath volume`);
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
    source: `${path.basename(file)} ${name}`,
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
