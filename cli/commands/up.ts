/**
 * `ambient-lab up [--nodes N] [--pods M] [--profile P] [--name NAME] [--no-ipv6] [--no-dns-capture]`:
 * a real-kernel cluster on this machine (private network namespaces, the API process, per node the
 * node agent and proxy as real processes) with M demo pods per node in namespace `demo` (labelled
 * for ambient), left running for a user to explore. IPv6 (dual-stack pods, v6 capture) and DNS
 * capture are on by default, as upstream's chart has them. State: /run/ambient-lab/NAME/state.json.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { NetnsLab } from '../../e2e/netns/world-lab.js';
import type { Profile } from '../../impl/api/profile.js';
import { DEFAULT_LAB, labDir, requireRootAndTools } from './lab-common.js';
import { EXIT_CODES_HELP, HarnessError, UsageError, parseIntFlag } from '../errors.js';

export const upCommand: CliCommand = {
  name: 'up',
  register(program: Command): void {
    program
      .command('up')
      .description(
        'start a real-kernel ambient cluster on this machine (root; private network namespaces) and leave it running',
      )
      .option('--nodes <n>', 'number of nodes', '2')
      .option('--pods <m>', 'demo pods per node (namespace demo, in the mesh)', '2')
      .option('--profile <p>', 'rule profile: upstream or strict', 'upstream')
      .option('--name <name>', 'lab name (several labs can run side by side)', DEFAULT_LAB)
      .option('--no-ipv6', 'IPv4-only pods and no v6 capture (default: dual-stack pods, v6 captured, as upstream)')
      .option(
        '--no-dns-capture',
        'the agent does not capture pod DNS (default: captured, as upstream; the lab has no DNS server, so captured DNS fails closed)',
      )
      .addHelpText('after', `\n${EXIT_CODES_HELP}`)
      .action(
        async (opts: {
          nodes: string;
          pods: string;
          profile: string;
          name: string;
          ipv6: boolean;
          dnsCapture: boolean;
        }) => {
          // Usage first (exit 2), then what the machine must offer (exit 3).
          const nodes = parseIntFlag('--nodes', opts.nodes, 1, 16);
          const pods = parseIntFlag('--pods', opts.pods, 0, 50);
          if (opts.profile !== 'upstream' && opts.profile !== 'strict')
            throw new UsageError(
              `--profile ${JSON.stringify(opts.profile)}: unknown profile; accepted: upstream, strict`,
            );
          const profile: Profile = opts.profile;
          const dir = labDir(opts.name);
          requireRootAndTools('up');
          if (fs.existsSync(path.join(dir, 'state.json')))
            throw new HarnessError(
              `lab ${opts.name} is already up (${dir}); run \`ambient-lab down --name ${opts.name}\` first`,
            );
          const t0 = Date.now();
          const lab = await NetnsLab.create({
            nodes,
            profile,
            name: opts.name,
            ipv6: opts.ipv6,
            dnsCapture: opts.dnsCapture,
            // it stays up: the proxies' projected tokens (12 h) are refreshed as kubelet would
            refreshTokens: true,
          });
          try {
            await lab.api.create('Namespace', {
              metadata: { name: 'demo', labels: { 'istio.io/dataplane-mode': 'ambient' } },
            });
            for (const n of lab.state.nodes) {
              for (let i = 0; i < pods; i++) {
                await lab.createPod({
                  namespace: 'demo',
                  name: `${n.name}-app-${i}`,
                  node: n.name,
                  labels: { app: `app-${i}` },
                  uid: 1000,
                  caps: [],
                  tcpPorts: [8080],
                });
              }
            }
          } catch (e) {
            await lab.destroy().catch(() => undefined);
            throw e;
          }
          process.stdout.write(
            `ambient-lab ${opts.name} is up in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${nodes} node(s), ${nodes * pods} pod(s) in namespace demo (port 8080); ` +
              `IPv6 ${opts.ipv6 ? 'on' : 'off'}, DNS capture ${opts.dnsCapture ? 'on' : 'off'}\n` +
              `  state:      ${path.join(lab.state.runDir, 'state.json')}\n  kubeconfig: ${lab.state.kubeconfig} (reachable from the node namespaces)\n` +
              `  try:        ambient-lab status; ambient-lab exec demo/node-0-app-0 -- node -e "..."; ambient-lab down\n`,
          );
        },
      );
  },
};
