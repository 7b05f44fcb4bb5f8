/**
 * What a node keeps across a container-runtime restart (and, except for running processes, a
 * reboot): the runtime's sandbox records, the CNI result cache (libcni's /var/lib/cni/results)
 * and host-local's allocations (/var/lib/cni/networks). The kubelet model is rebuilt from this
 * on start, as containerd re-reads its metadata store.
 */
import { MemoryResultCache } from '../cni/chain.js';
import { IpamDisk } from '../cni/host-local.js';
import type { SimContainer } from './container.js';

export interface SandboxRecord {
  readonly podUid: string;
  readonly namespace: string;
  readonly name: string;
  readonly sandboxId: string;
  /** sim netns name ('' for hostNetwork pods, which have no sandbox netns). */
  readonly netns: string;
  readonly netnsPath: string;
  readonly hostNetwork: boolean;
  /** CNI networks ADDed for this sandbox, in order (DEL goes in reverse). */
  readonly networks: string[];
  /** true once every ADD succeeded and the containers started. */
  ready: boolean;
  /** Pod IPs from the CNI result (IPv4 first). */
  ips: string[];
  /** Running container processes (gone after a reboot). */
  containers: SimContainer[];
}

export class NodeDisk {
  readonly ipam = new IpamDisk();
  readonly cniCache = new MemoryResultCache();
  /** Sandboxes by pod UID (one live sandbox per pod). */
  readonly sandboxes = new Map<string, SandboxRecord>();
  /** Sandbox ids are never reused on a node. */
  nextSandboxSeq = 1;
}
