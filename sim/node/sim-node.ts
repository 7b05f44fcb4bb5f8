/**
 * One simulated machine: its host netns, its disk (runtime state, CNI cache, IPAM), its CNI
 * plugins and configuration list, and its kubelet. Reboot and runtime restart live here because
 * they change more than the kubelet: a reboot kills every process and pod netns and clears the
 * host's CNI devices; a runtime restart only restarts the kubelet/runtime model.
 */
import type { CniConfList, CniPlugin, CniPluginConf } from '../../impl/api/cni.js';
import type { SimKernel } from '../kernel/kernel.js';
import type { InProcessPlugins } from '../cni/plugins.js';
import type { NodeDisk } from './runtime-state.js';
import type { SimKubelet } from './kubelet.js';

interface SimNodeAddresses {
  readonly ipv4: string;
  readonly ipv6: string | undefined;
}

export class SimNode {
  private list: CniConfList;

  constructor(
    readonly name: string,
    readonly index: number,
    readonly hostNetns: string,
    readonly address: SimNodeAddresses,
    readonly podCidr: SimNodeAddresses,
    readonly kernel: SimKernel,
    readonly disk: NodeDisk,
    readonly plugins: InProcessPlugins,
    network: CniConfList,
    /** Set once by the world (the kubelet needs the node's network() getter first). */
    public kubelet: SimKubelet | undefined = undefined,
  ) {
    this.list = structuredClone(network);
  }

  /** The CNI configuration list the runtime reads at each operation. */
  get network(): CniConfList {
    return this.list;
  }

  set network(list: CniConfList) {
    this.list = structuredClone(list);
  }

  /**
   * Chain a plugin after the existing ones (what istio-cni's installer does to the primary
   * conflist), registering its in-process implementation under `conf.type`.
   */
  chainPlugin(conf: CniPluginConf, impl: CniPlugin): void {
    this.plugins.register(conf.type, impl);
    this.list = {
      ...this.list,
      plugins: [...this.list.plugins.filter((p) => p.type !== conf.type), structuredClone(conf)],
    };
  }

  /** Remove a chained plugin from the list (the implementation stays registered for DELs). */
  unchainPlugin(type: string): void {
    this.list = { ...this.list, plugins: this.list.plugins.filter((p) => p.type !== type) };
  }

  private get kl(): SimKubelet {
    if (!this.kubelet) throw new Error(`node ${this.name} has no kubelet yet`);
    return this.kubelet;
  }

  /**
   * Reboot: every process dies, every pod netns is destroyed (with its veths), the CNI bridge
   * goes, the host's netfilter rules, ipsets and conntrack are emptied; the disk (runtime records, CNI cache, IPAM files) stays. The kubelet comes back and
   * recreates each pod's sandbox under the same pod UID: DEL of the dead sandbox, new netns, ADD.
   */
  async reboot(): Promise<void> {
    this.kl.stop();
    for (const rec of this.disk.sandboxes.values()) {
      for (const c of rec.containers) c.stop();
      rec.containers = [];
      if (rec.netns && this.kernel.hasNetns(rec.netns)) this.kernel.deleteNetns(rec.netns);
    }
    const host = this.kernel.netns(this.hostNetns);
    for (const l of [...host.links.values()]) {
      if (l.kind === 'bridge' && l.name.startsWith('cni')) this.kernel.removeLink(host, l.name);
    }
    // The host's netfilter rules, ipsets and conntrack live in kernel memory: a reboot loses them,
    // and whoever installed them (the node agent's host rules and probe sets) must do it again.
    // Links, addresses and routes come back from the node's boot configuration, kept as they are.
    for (const family of [4, 6] as const) {
      // Only the tables in use get flushed, so the set of loaded tables stays what the agent's own
      // writes load again (the sim cannot unload a table; Linux would start with none loaded).
      const loaded = [...this.kernel.iptablesSave(this.hostNetns, family).matchAll(/^\*(\w+)$/gm)].map((m) => m[1]);
      if (loaded.length > 0)
        this.kernel.iptablesRestore(this.hostNetns, family, loaded.map((t) => `*${t}\nCOMMIT\n`).join(''), {
          source: `reboot of ${this.name}`,
        });
    }
    const sets = this.kernel.ipsetsOf(this.hostNetns);
    for (const name of sets.names()) sets.destroy(name);
    host.conntrack.flush();
    await this.kl.start();
  }

  /** Container runtime (and kubelet) restart: sandboxes and containers survive; state is re-read from disk. */
  async restartRuntime(): Promise<void> {
    this.kl.stop();
    await this.kl.start();
  }
}
