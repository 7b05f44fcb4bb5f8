/**
 * The CNI installer process (runs as the `install-cni` container of the agent DaemonSet:
 * `node dist/impl/linux/cni-installer-main.js [install|uninstall] [flags]`).
 * Flags or AMBIENT_LAB_* variables —
 *   install (default): CniInstaller with the Linux adapters; keeps the plugin installed until SIGTERM.
 *     --cni-bin-dir PATH      (default /host/opt/cni/bin)
 *     --cni-conf-dir PATH     (default /host/etc/cni/net.d)
 *     --mode chained|own-conflist (default chained)    --own-conflist-name NAME (default 01-ambient-lab.conflist)
 *     --plugin-source PATH    (default /app/cni/ambient-lab-cni: the launcher in the image)
 *     --payload FROM:TO,...   (more files copied next to it, e.g. the runtime the launcher execs)
 *     --kubeconfig-file PATH  (default /var/run/ambient-lab/cni/cni-kubeconfig; the same path on the node)
 *     --agent-socket PATH     (default /var/run/ambient-lab/cni/agent.sock, the agent's --plugin-socket)
 *     --exclude-namespaces a,b (default kube-system)   --system-namespace NS (default ambient-lab-system)
 *     --resync-ms N (default 30000)    --uninstall-on-exit (default false)   --log-level L
 *   uninstall: remove the entry, kubeconfig and executables, then exit.
 * (The agent and proxy need no kubeconfig file in a pod: they use in-cluster config.)
 *
 * Why SIGTERM leaves the plugin in place by default: an agent restart or upgrade must not open a
 * window in which pods start without the plugin; with the agent down the plugin refuses ambient
 * pods (fail closed). Set --uninstall-on-exit only where the DaemonSet is being removed for good.
 */
import { readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import * as path from 'node:path';
import { CniInstaller, DEFAULT_OWN_CONFLIST, type CniInstallConfig, type PayloadFile } from '../node-agent/install.js';
import { SystemClock } from './clock.js';
import { ComponentFlags, ConfigError, runComponent } from './component-main.js';
import { NodeFileSystem } from './files.js';
import { pinoLogger } from './logger-pino.js';

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The API server as reachable from the node (the plugin runs in the host netns). */
export function inClusterServer(env: NodeJS.ProcessEnv): string {
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'];
  if (!host || !port) throw new ConfigError('KUBERNETES_SERVICE_HOST/PORT are not set: not running in a pod?');
  return `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
}

function parsePayload(spec: string[]): PayloadFile[] {
  return spec.map((s) => {
    const [from, to] = s.split(':');
    if (!from || !to || !path.isAbsolute(from) || !path.isAbsolute(to)) throw new ConfigError(`--payload entries are FROM:TO absolute paths, got ${JSON.stringify(s)}`);
    return { from, to, mode: 0o755 };
  });
}

const argv = process.argv.slice(2);
const command = argv[0] && !argv[0].startsWith('--') ? argv.shift()! : 'install';

runComponent('ambient-lab-cni-installer', async () => {
  const f = new ComponentFlags(argv, process.env, 'ambient-lab-cni-installer');
  if (command !== 'install' && command !== 'uninstall') throw new ConfigError(`unknown command ${JSON.stringify(command)}: install or uninstall`);
  const kubeconfigFile = f.str('kubeconfig-file', '/var/run/ambient-lab/cni/cni-kubeconfig');
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
      excludeNamespaces: f.list('exclude-namespaces', ['kube-system']),
      systemNamespace: f.str('system-namespace', 'ambient-lab-system'),
    },
    resyncMs: f.int('resync-ms', 30_000, 1000),
  };
  const uninstallOnExit = f.bool('uninstall-on-exit', false);
  const level = f.oneOf('log-level', ['debug', 'info', 'warn', 'error'] as const, 'info');
  f.assertAllUsed();
  const log = pinoLogger({ name: 'ambient-lab-cni-installer', level });
  const installer = new CniInstaller(config, {
    fs: new NodeFileSystem(),
    clock: new SystemClock(),
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
    if (uninstallOnExit) await installer.uninstall();
    else installer.stop();
  };
});
