/**
 * Strict's mark exemption belongs to the node proxy's uid: the in-pod rules let a marked packet
 * out uncaptured only when its socket is owned by that uid. A pod whose containers run as the
 * same uid could set the mark (with NET_ADMIN or NET_RAW) and pass as the proxy, so under strict
 * the agent refuses to admit such a pod to the mesh (the CNI ADD fails: the pod does not start).
 *
 * What is checked is what the pod spec declares: `runAsUser` of the pod and of every container
 * (init, regular, ephemeral; a container's own value overrides the pod's). A container that
 * declares no uid runs as its image's USER, which the agent cannot see; that residual is closed
 * by admission (docs/bypass-classes.md, B1), not here.
 */
import type { KubeObjectOf } from '../host/kube.js';

type Pod = KubeObjectOf<'Pod'>;

/** The spec fields that make one of the pod's containers run as `uid` (e.g. `spec.containers[app].securityContext.runAsUser`). */
export function fieldsRunningAs(pod: Pod, uid: number): string[] {
  const podUid = pod.spec?.securityContext?.runAsUser;
  const out: string[] = [];
  const groups = [
    ['initContainers', pod.spec?.initContainers ?? []],
    ['containers', pod.spec?.containers ?? []],
    ['ephemeralContainers', pod.spec?.ephemeralContainers ?? []],
  ] as const;
  for (const [list, containers] of groups) {
    for (const c of containers) {
      const own = c.securityContext?.runAsUser;
      if (own === uid) out.push(`spec.${list}[${c.name}].securityContext.runAsUser`);
      else if (own === undefined && podUid === uid)
        out.push(`spec.securityContext.runAsUser (container ${list}[${c.name}])`);
    }
  }
  return out;
}
