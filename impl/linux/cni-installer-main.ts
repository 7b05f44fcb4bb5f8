/**
 * The CNI installer process (runs as the `install-cni` container of the agent DaemonSet:
 * `node dist/impl/linux/cni-installer-main.js [install|uninstall] [flags]`).
 * Configuration: cni-installer-config.ts (flags or AMBIENT_LAB_* variables; a bad value exits 2).
 *   install (default): CniInstaller with the Linux adapters; keeps the plugin installed until SIGTERM.
 *   uninstall: remove the entry, kubeconfig and executables, then exit.
 * (The agent and proxy need no kubeconfig file in a pod: they use in-cluster config.)
 *
 * At SIGTERM (install.ts decideUninstallOnExit): --uninstall-on-exit never (the default) leaves
 * the plugin in place; always removes it; when-daemonset-gone (what the DaemonSet sets, upstream's
 * safe upgrade) removes it only when the owning DaemonSet is gone, being deleted or no longer
 * selecting this node by its required node affinity — an agent
 * restart or upgrade must not open a window in which pods start without the plugin (with the
 * agent down the plugin refuses ambient pods: fail closed), while removing the DaemonSet must
 * leave a node on which pods start normally, with none of our files in the CNI dirs.
 */
import { readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { AppsV1Api, ApiException, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { CniInstaller, daemonSetOwnerState, decideUninstallOnExit, type OwnerState } from '../node-agent/install.js';
import { SystemClock } from './clock.js';
import { installerSettings } from './cni-installer-config.js';
import { ConfigError, runComponent } from './component-main.js';
import { NodeFileSystem } from './files.js';
import { pinoLogger } from './logger-pino.js';

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The API server as reachable from the node (the plugin runs in the host netns). */
function inClusterServer(env: NodeJS.ProcessEnv): string {
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'];
  if (!host || !port) throw new ConfigError('KUBERNETES_SERVICE_HOST/PORT are not set: not running in a pod?');
  return `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
}

/**
 * The owning DaemonSet as the API sees it, with the pod's service account (in-cluster config);
 * this node (`nodeName`, the pod's spec.nodeName) is read only when the DaemonSet has a required
 * node affinity (install.ts daemonSetOwnerState).
 */
async function ownerState(
  owner: { readonly namespace: string; readonly name: string },
  nodeName: string | undefined,
): Promise<OwnerState> {
  const kc = new KubeConfig();
  kc.loadFromCluster();
  try {
    const ds = await kc.makeApiClient(AppsV1Api).readNamespacedDaemonSet(owner);
    return await daemonSetOwnerState(
      { deleting: ds.metadata?.deletionTimestamp !== undefined, podSpec: ds.spec?.template?.spec },
      async () => {
        if (nodeName === undefined)
          throw new Error(
            `DaemonSet ${owner.namespace}/${owner.name} has a required node affinity, but this installer does not know its node: set --node or AMBIENT_LAB_NODE (spec.nodeName)`,
          );
        const node = await kc.makeApiClient(CoreV1Api).readNode({ name: nodeName });
        return { name: nodeName, labels: node.metadata?.labels ?? {} };
      },
    );
  } catch (e) {
    if (e instanceof ApiException) {
      if (e.code === 404) return 'absent';
      if (e.code === 401 || e.code === 403) return 'unauthorized';
      throw new Error(`reading DaemonSet ${owner.namespace}/${owner.name}: HTTP ${e.code}`, { cause: e });
    }
    throw e;
  }
}

runComponent('ambient-lab-cni-installer', async () => {
  const {
    command,
    config,
    uninstallOnExit,
    owner,
    node,
    logLevel: level,
  } = installerSettings(process.argv.slice(2), process.env);
  const log = pinoLogger({ name: 'ambient-lab-cni-installer', level });
  const clock = new SystemClock();
  const installer = new CniInstaller(config, {
    fs: new NodeFileSystem(),
    clock,
    log,
    credentials: async () => ({
      server: inClusterServer(process.env),
      caPem: readFileSync(`${SA_DIR}/ca.crt`, 'utf8'),
      token: readFileSync(`${SA_DIR}/token`, 'utf8').trim(),
    }),
  });
  if (command === 'uninstall') {
    const r = await installer.uninstall();
    process.stdout.write(`${JSON.stringify(r)}\n`);
    process.exit(0);
  }
  const first = await installer.start();
  log.info('cni installer running', { state: first.state, mode: config.mode, confDir: config.cniConfDir });
  return async () => {
    const decision = await decideUninstallOnExit(uninstallOnExit, {
      owner: () => ownerState(owner, node),
      clock,
      log,
    });
    log.info('cni installer exiting', { uninstall: decision.uninstall, why: decision.why });
    if (decision.uninstall) await installer.uninstall();
    else installer.stop();
  };
});
