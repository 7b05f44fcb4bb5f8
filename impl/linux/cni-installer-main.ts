/**
 * The CNI installer process (runs as the `install-cni` container of the agent DaemonSet:
 * `node dist/impl/linux/cni-installer-main.js [install|uninstall] [flags]`).
 * Configuration: cni-installer-config.ts (flags or AMBIENT_LAB_* variables; a bad value exits 2).
 *   install (default): CniInstaller with the Linux adapters; keeps the plugin installed until SIGTERM.
 *   uninstall: remove the entry, kubeconfig and executables, then exit.
 * (The agent and proxy need no kubeconfig file in a pod: they use in-cluster config.)
 *
 * Why SIGTERM leaves the plugin in place by default: an agent restart or upgrade must not open a
 * window in which pods start without the plugin; with the agent down the plugin refuses ambient
 * pods (fail closed). Set --uninstall-on-exit only where the DaemonSet is being removed for good.
 */
import { readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { CniInstaller } from '../node-agent/install.js';
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

runComponent('ambient-lab-cni-installer', async () => {
  const { command, config, uninstallOnExit, logLevel: level } = installerSettings(process.argv.slice(2), process.env);
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
