/**
 * `ambient-lab pod add NAME [...]` and `pod delete NAMESPACE/NAME`: pods of a cluster made by
 * `ambient-lab up`, through its daemon. An added pod goes through the whole CNI chain and
 * enrollment as the demo pods did; its app listens on the given ports as the given uid with the
 * given capabilities (the attacks' knobs).
 */
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { EXIT_CODES_HELP, UsageError, parseIntFlag } from '../errors.js';
import { APP_CAPS } from '../../e2e/netns/lab-control.js';
import { controlLab, DEFAULT_LAB, keyValues, podRefOf, printResult } from './lab-common.js';

const collect = (v: string, prev: string[]): string[] => [...prev, v];

/** `--tcp-port 80 --tcp-port 8080` or `--tcp-port 80,8080`. */
function portList(flag: string, values: readonly string[]): number[] {
  return values.flatMap((v) => v.split(',')).map((p) => parseIntFlag(flag, p, 1, 65535));
}

interface PodAddOptions {
  name: string;
  namespace: string;
  node?: string;
  uid: string;
  caps?: string;
  label: string[];
  annotation: string[];
  hostNetwork?: boolean;
  probePort: string[];
  tcpPort: string[];
  udpPort: string[];
  json?: boolean;
}

export const podCommand: CliCommand = {
  name: 'pod',
  register(program: Command): void {
    const pod = program.command('pod').description('add or delete a pod of a cluster made by `ambient-lab up`');
    pod
      .command('add')
      .description('add a pod: CNI chain, enrollment when its namespace or labels say ambient, and its app')
      .argument('<name>', 'pod name')
      .option('--namespace <ns>', 'namespace (made, without labels, when missing)', 'demo')
      .option('--node <node>', 'node (default: the first)')
      .option('--uid <uid>', "the app's uid (0: root)", '1000')
      .option('--caps <list>', `capabilities added to the app, comma-separated (${APP_CAPS.join(', ')})`)
      .option('--label <k=v>', 'a pod label (repeat for more)', collect, [])
      .option('--annotation <k=v>', 'a pod annotation (repeat for more)', collect, [])
      .option('--host-network', 'run on the node network (never enrolled)')
      .option(
        '--probe-port <port>',
        'a port the kubelet probes (tcpSocket readiness; repeat or comma-separate)',
        collect,
        [],
      )
      .option(
        '--tcp-port <port>',
        'a TCP port the app listens on (repeat or comma-separate; default 8080)',
        collect,
        [],
      )
      .option('--udp-port <port>', 'a UDP port the app listens on (repeat or comma-separate)', collect, [])
      .option('--name <lab>', 'lab name', DEFAULT_LAB)
      .option('--json', 'print the pod as JSON')
      .addHelpText('after', `\n${EXIT_CODES_HELP}`)
      .action(async (podName: string, o: PodAddOptions) => {
        const labels = o.label.length > 0 ? keyValues(o.label, 'label') : {};
        const annotations = o.annotation.length > 0 ? keyValues(o.annotation, 'annotation') : {};
        for (const [k, v] of Object.entries({ ...labels, ...annotations }))
          if (v === null)
            throw new UsageError(`${k}-: pod add sets labels and annotations; KEY- removes only on label / annotate`);
        const tcp = portList('--tcp-port', o.tcpPort);
        const result = await controlLab('pod add', o.name, {
          op: 'pod-add',
          pod: {
            namespace: o.namespace,
            name: podName,
            ...(o.node !== undefined ? { node: o.node } : {}),
            uid: parseIntFlag('--uid', o.uid, 0, 65534),
            caps: o.caps ? o.caps.split(',').map((c) => c.trim().toUpperCase().replace(/^CAP_/, '')) : [],
            labels,
            annotations,
            hostNetwork: o.hostNetwork === true,
            tcpPorts: tcp.length > 0 ? tcp : [8080],
            udpPorts: portList('--udp-port', o.udpPort),
            probePorts: portList('--probe-port', o.probePort),
          },
        });
        printResult(result, o.json);
      });
    pod
      .command('delete')
      .description('delete a pod (CNI DEL, the agent removes it from the mesh)')
      .argument('<pod>', 'NAMESPACE/NAME (or NAME in namespace demo)')
      .option('--name <lab>', 'lab name', DEFAULT_LAB)
      .option('--json', 'print the answer as JSON')
      .action(async (arg: string, o: { name: string; json?: boolean }) => {
        printResult(await controlLab('pod delete', o.name, { op: 'pod-delete', ...podRefOf(arg) }), o.json);
      });
  },
};
