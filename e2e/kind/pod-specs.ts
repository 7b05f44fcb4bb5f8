/**
 * The pods the kind world creates: app pods (the netns world's pod app, from the agent image, as
 * the threat model's uid/capabilities) and one host-probe pod per node (hostNetwork, root, with
 * what setpriv needs to become any host source; the agent's ZDS socket directory mounted).
 */
import type * as k8s from '@kubernetes/client-node';
import type { PodSpec } from '../../scenarios/world.js';
import { E2E_NAMESPACE, POD_APP } from './kind-cli.js';

/** The host-probe pod of a node: root in the node netns, with just what setpriv needs to become any source. */
export function hostProbePod(node: string, image: string): k8s.V1Pod {
  return {
    metadata: {
      name: `host-probe-${node}`.slice(0, 63),
      namespace: E2E_NAMESPACE,
      labels: { 'app.kubernetes.io/name': 'ambient-lab-host-probe' },
    },
    spec: {
      nodeName: node,
      hostNetwork: true,
      terminationGracePeriodSeconds: 1,
      tolerations: [{ operator: 'Exists' }],
      containers: [
        {
          name: 'probe',
          image,
          imagePullPolicy: 'IfNotPresent',
          command: ['sleep', 'infinity'],
          // NET_ADMIN/NET_RAW: the most a host source may be given; SETUID/SETGID/SETPCAP: setpriv
          // switches uid and trims the capability sets to the source's
          securityContext: {
            runAsUser: 0,
            allowPrivilegeEscalation: false,
            capabilities: { drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW', 'SETUID', 'SETGID', 'SETPCAP'] },
          },
          // the agent's ZDS socket, for a rogue client on the node (World.zdsClient); file permissions still apply
          volumeMounts: [{ name: 'zds', mountPath: '/var/run/ambient-lab/zds', readOnly: true }],
        },
      ],
      volumes: [{ name: 'zds', hostPath: { path: '/var/run/ambient-lab/zds', type: 'DirectoryOrCreate' } }],
    },
  };
}

/** The app pod of a PodSpec: the pod app listening on the spec's ports, as the spec's uid/caps. */
export function appPod(spec: PodSpec, image: string): k8s.V1Pod {
  // check does not stage such threats here (scenarios/model/worlds.ts worldLimits imageUser).
  if (spec.app.uidSource === 'image')
    throw new Error(
      `kind world: pod ${spec.namespace}/${spec.name} would run as its image's USER ${spec.app.uid}; the kind world's only pod image runs as root — run this case on the sim, netns or container world`,
    );
  const tcp = spec.app.tcpPorts.join(',');
  const udp = (spec.app.udpPorts ?? []).join(',');
  return {
    metadata: {
      name: spec.name,
      namespace: spec.namespace,
      labels: { ...spec.labels },
      annotations: { ...spec.annotations },
    },
    spec: {
      ...(spec.node ? { nodeName: spec.node } : {}),
      ...(spec.serviceAccount ? { serviceAccountName: spec.serviceAccount } : {}),
      hostNetwork: spec.hostNetwork ?? false,
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'app',
          image,
          imagePullPolicy: 'IfNotPresent',
          command: [
            'node',
            POD_APP,
            '--pod',
            `${spec.namespace}/${spec.name}`,
            '--report',
            '/dev/stdout',
            ...(tcp ? ['--tcp', tcp] : []),
            ...(udp ? ['--udp', udp] : []),
          ],
          securityContext: {
            runAsUser: spec.app.uid,
            runAsGroup: spec.app.uid,
            allowPrivilegeEscalation: false,
            capabilities: { drop: ['ALL'], add: [...spec.app.caps] },
          },
          ports: [
            ...spec.app.tcpPorts.map((p) => ({ containerPort: p, protocol: 'TCP' })),
            ...(spec.app.udpPorts ?? []).map((p) => ({ containerPort: p, protocol: 'UDP' })),
          ],
          ...(spec.app.probePorts?.length
            ? { readinessProbe: { tcpSocket: { port: spec.app.probePorts[0]! }, periodSeconds: 2 } }
            : {}),
        },
      ],
    },
  };
}
