/**
 * The netns-finder port: locate a running pod's network namespace when the CNI event that named
 * it is gone (agent restart, live enrollment, repair after a reboot). On Linux this scans /proc
 * for a process whose cgroup names the pod UID and whose namespace holds one of the pod's IPs;
 * in the sim it asks the container runtime model. Types only.
 */
import type { NetnsId } from '../api/ids.js';

export interface NetnsFinder {
  /** The pod's current netns, verified to hold one of `ips`; undefined when none is found. */
  find(podUid: string, ips: readonly string[]): Promise<NetnsId | undefined>;
  /** Does this netns handle still refer to a live namespace? */
  exists(netns: NetnsId): Promise<boolean>;
}
