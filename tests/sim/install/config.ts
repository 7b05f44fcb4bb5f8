/**
 * The installer's configuration for its sim tests (install.spec.ts, readiness.spec.ts), built in
 * one place: the node's CNI dirs as the agent mounts them and the deployment's paths (the
 * defaults of impl/linux/cni-installer-config.ts), chained mode, no payload. `over` replaces
 * whole fields.
 */
import type { CniInstallConfig } from '../../../impl/node-agent/install.js';

export const CONF = '/host/etc/cni/net.d';
export const BIN = '/host/opt/cni/bin';
/** The primary CNI's conflist, kindnet's as on a kind node. */
export const PRIMARY = `${CONF}/10-kindnet.conflist`;
export const KUBECONFIG = '/var/run/ambient-lab/cni/cni-kubeconfig';
export const AGENT_SOCKET = '/var/run/ambient-lab/cni/agent.sock';

export function installConfig(over: Partial<CniInstallConfig> = {}): CniInstallConfig {
  return {
    cniBinDir: BIN,
    cniConfDir: CONF,
    mode: 'chained',
    ownConfListName: '01-ambient-lab.conflist',
    pluginSource: '/app/cni/ambient-lab-cni',
    payload: [],
    kubeconfigFile: KUBECONFIG,
    pluginFields: { agentSocket: AGENT_SOCKET, kubeconfig: KUBECONFIG },
    resyncMs: 30_000,
    ...over,
  };
}
