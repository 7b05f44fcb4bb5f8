/**
 * What the daemon of an `ambient-lab up` cluster does with each control request
 * (lab-control.ts): the same World calls the check harness makes on the netns world, on the
 * cluster this daemon made and keeps. Pods added here go through the CNI chain and enrollment
 * like the demo pods; a namespace a new pod names is created first (without labels) when missing.
 */
import type { LabRequest } from './lab-control.js';
import { LabRequestError } from './lab-control.js';
import { unless } from './world-lab.js';
import type { NetnsWorld } from './world.js';

/** What `ping` answers: enough for `up` to print where things are. */
export interface LabSummary {
  readonly name: string;
  readonly runDir: string;
  readonly kubeconfig: string;
  readonly nodes: readonly string[];
  readonly profile: string;
  readonly ipv6: boolean;
  readonly dnsCapture: boolean;
  readonly pods: number;
  readonly daemonPid: number;
}

export function labRequestHandler(world: NetnsWorld): (req: LabRequest) => Promise<unknown> {
  const lab = world.lab;
  const node = (name: string | undefined): string => {
    const n = name ?? world.nodes[0]!;
    if (!world.nodes.includes(n))
      throw new LabRequestError(`node ${JSON.stringify(n)}: no such node; nodes: ${world.nodes.join(', ')}`);
    return n;
  };
  return async (req) => {
    switch (req.op) {
      case 'ping':
        return {
          name: lab.state.name,
          runDir: lab.state.runDir,
          kubeconfig: lab.state.kubeconfig,
          nodes: world.nodes,
          profile: lab.state.profile,
          ipv6: lab.state.ipv6 === true,
          dnsCapture: lab.state.dnsCapture === true,
          pods: Object.keys(lab.state.pods).length,
          daemonPid: process.pid,
        } satisfies LabSummary;
      case 'pod-add': {
        const p = req.pod;
        const ns = await lab.api.get('Namespace', p.namespace).catch(unless(404));
        if (!ns) await world.createNamespace(p.namespace);
        return world.createPod({
          namespace: p.namespace,
          name: p.name,
          node: node(p.node),
          labels: p.labels,
          annotations: p.annotations,
          hostNetwork: p.hostNetwork,
          app: { uid: p.uid, caps: p.caps, tcpPorts: p.tcpPorts, udpPorts: p.udpPorts, probePorts: p.probePorts },
        });
      }
      case 'pod-delete':
        await world.deletePod({ namespace: req.namespace, name: req.name });
        return { deleted: `${req.namespace}/${req.name}` };
      case 'label':
        if (req.kind === 'pod') await world.labelPod({ namespace: req.namespace!, name: req.name }, req.values);
        else await world.labelNamespace(req.name, req.values);
        return { [req.kind]: req.namespace ? `${req.namespace}/${req.name}` : req.name, labels: req.values };
      case 'annotate':
        await lab.api.patch(req.kind === 'pod' ? 'Pod' : 'Namespace', req.name, req.namespace, {
          metadata: { annotations: req.values },
        });
        return { [req.kind]: req.namespace ? `${req.namespace}/${req.name}` : req.name, annotations: req.values };
      case 'policy-apply':
        await world.applyPolicy(req.policy);
        return { applied: req.policy['metadata'] };
      case 'policy-delete':
        await world.deletePolicy(req.namespace, req.name);
        return { deleted: `${req.namespace}/${req.name}` };
      case 'component': {
        const n = node(req.node);
        await world[req.action](req.component, n);
        return { [req.component]: n, action: req.action };
      }
      case 'node-reboot':
        await world.rebootNode(node(req.node));
        return { rebooted: req.node };
      case 'api-fault': {
        if (lab.backend)
          throw new Error('this cluster cannot break the API for the CNI plugin (its nodes are containers)');
        const nodes = req.node !== undefined ? [node(req.node)] : world.nodes;
        const mode = req.mode ?? 'unreachable';
        for (const n of nodes) lab.setCniApiFault(n, req.failing, mode);
        return { nodes, failing: req.failing, ...(req.failing ? { mode } : {}) };
      }
      case 'down':
        await lab.destroy();
        return { down: lab.state.name, prefix: lab.state.prefix };
    }
  };
}
