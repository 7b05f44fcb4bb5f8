/**
 * The CNI installer's configuration from flags or AMBIENT_LAB_* variables (cni-installer-main.ts
 * runs it; tests read the DaemonSet's environment through it). A bad value is a ConfigError
 * naming the flag (the process exits 2).
 *   install (default) | uninstall
 *     --cni-bin-dir PATH      (default /host/opt/cni/bin)
 *     --cni-conf-dir PATH     (default /host/etc/cni/net.d)
 *     --mode chained|own-conflist (default chained)    --own-conflist-name NAME (default 01-ambient-lab.conflist)
 *     --plugin-source PATH    (default /app/cni/ambient-lab-cni: the launcher in the image)
 *     --payload FROM:TO,...   (more files copied next to it, e.g. the runtime the launcher execs)
 *     --kubeconfig-file PATH  (default /var/run/ambient-lab/cni/cni-kubeconfig; the same path on the node)
 *     --agent-socket PATH     (default /var/run/ambient-lab/cni/agent.sock, the agent's --plugin-socket)
 *     --exclude-namespaces --system-namespace --own-pod-prefixes   (enrollment-flags.ts: the agent reads
 *                             the same flags, and the installer writes them into the plugin's configuration)
 *     --resync-ms N (default 30000)    --log-level L
 *     --uninstall-on-exit never|always|when-daemonset-gone (default never; true = always, false = never)
 *                             at SIGTERM (install.ts decideUninstallOnExit); when-daemonset-gone is
 *                             upstream's safe upgrade and what the DaemonSet sets
 *     --daemonset NAME        (default ambient-lab-agent: the owner looked up in --system-namespace)
 *     --node NAME             (this node, spec.nodeName: read at exit when the owner has a required
 *                             node affinity, to tell whether a replacement will come here)
 */
import * as path from 'node:path';
import {
  DEFAULT_OWN_CONFLIST,
  type CniInstallConfig,
  type PayloadFile,
  type UninstallOnExit,
} from '../node-agent/install.js';
import { ComponentFlags, ConfigError } from './component-main.js';
import { enrollmentSettingsFromFlags } from './enrollment-flags.js';

const C = 'ambient-lab-cni-installer';

interface InstallerSettings {
  readonly command: 'install' | 'uninstall';
  readonly config: CniInstallConfig;
  readonly uninstallOnExit: UninstallOnExit;
  /** The DaemonSet that runs the installer, and its namespace (when-daemonset-gone looks it up). */
  readonly owner: { readonly namespace: string; readonly name: string };
  /** This node's name, when known (the exit check reads the Node only for a DaemonSet with a required node affinity). */
  readonly node: string | undefined;
  readonly logLevel: 'debug' | 'info' | 'warn' | 'error';
}

function parsePayload(spec: string[]): PayloadFile[] {
  return spec.map((s) => {
    const [from, to] = s.split(':');
    if (!from || !to || !path.isAbsolute(from) || !path.isAbsolute(to))
      throw new ConfigError(`${C}: --payload entries are FROM:TO absolute paths, got ${JSON.stringify(s)}`);
    return { from, to, mode: 0o755 };
  });
}

export function installerSettings(argvIn: readonly string[], env: NodeJS.ProcessEnv): InstallerSettings {
  const argv = [...argvIn];
  const command = argv[0] && !argv[0].startsWith('--') ? argv.shift()! : 'install';
  if (command !== 'install' && command !== 'uninstall')
    throw new ConfigError(`${C}: unknown command ${JSON.stringify(command)}: install or uninstall`);
  const f = new ComponentFlags(argv, env, C);
  const kubeconfigFile = f.str('kubeconfig-file', '/var/run/ambient-lab/cni/cni-kubeconfig');
  const enrollment = enrollmentSettingsFromFlags(f, C);
  const config: CniInstallConfig = {
    cniBinDir: f.str('cni-bin-dir', '/host/opt/cni/bin'),
    cniConfDir: f.str('cni-conf-dir', '/host/etc/cni/net.d'),
    mode: f.oneOf('mode', ['chained', 'own-conflist'] as const, 'chained'),
    ownConfListName: f.str('own-conflist-name', DEFAULT_OWN_CONFLIST),
    pluginSource: f.str('plugin-source', '/app/cni/ambient-lab-cni'),
    payload: parsePayload(f.list('payload', [])),
    kubeconfigFile,
    pluginFields: {
      agentSocket: f.str('agent-socket', '/var/run/ambient-lab/cni/agent.sock'),
      kubeconfig: kubeconfigFile,
      excludeNamespaces: enrollment.excludeNamespaces,
      systemNamespace: enrollment.systemNamespace,
      ownPodPrefixes: enrollment.ownPodPrefixes,
    },
    resyncMs: f.int('resync-ms', 30_000, 1000),
  };
  const exitRaw = f.str('uninstall-on-exit', 'never');
  const exitAliases: Record<string, UninstallOnExit> = { true: 'always', false: 'never' };
  const uninstallOnExit =
    exitAliases[exitRaw] ??
    (['never', 'always', 'when-daemonset-gone'].includes(exitRaw) ? (exitRaw as UninstallOnExit) : undefined);
  if (uninstallOnExit === undefined)
    throw new ConfigError(
      `${C}: --uninstall-on-exit must be never, always or when-daemonset-gone (or true/false), got ${JSON.stringify(exitRaw)}`,
    );
  const owner = { namespace: enrollment.systemNamespace, name: f.str('daemonset', 'ambient-lab-agent') };
  const node = f.optional('node');
  const logLevel = f.oneOf('log-level', ['debug', 'info', 'warn', 'error'] as const, 'info');
  f.assertAllUsed();
  return { command, config, uninstallOnExit, owner, node, logLevel };
}
