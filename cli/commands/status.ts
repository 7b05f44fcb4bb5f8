/** `ambient-lab status [--name NAME] [--json]`: nodes, components, pods (IPs, annotation, redirection, served). */
import * as fs from 'node:fs';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { NetnsLab } from '../../e2e/netns/world-lab.js';
import { observeIn } from '../../e2e/netns/observe.js';
import { REDIRECTION_STATUS } from '../../impl/api/annotations.js';
import { DEFAULT_LAB, labDir, requireRootAndTools } from './lab-common.js';
import { EXIT_CODES_HELP } from '../errors.js';

/** The mesh's outbound redirect, in either form (nat REDIRECT or mangle TPROXY), as the netns world reads it. */
const REDIRECT_RULE = /--to-ports 15001\b|--on-port 15001\b/;

export const statusCommand: CliCommand = {
  name: 'status',
  register(program: Command): void {
    program
      .command('status')
      .description('show a cluster made by `ambient-lab up`: components, pods, IPs, annotations, redirection')
      .option('--name <name>', 'lab name', DEFAULT_LAB)
      .option('--json', 'machine-readable output')
      .addHelpText('after', `\n${EXIT_CODES_HELP}`)
      .action(async (opts: { name: string; json?: boolean }) => {
        const dir = labDir(opts.name);
        requireRootAndTools('status');
        const lab = NetnsLab.attach(dir);
        const nodes = [];
        for (const n of lab.state.nodes) {
          const agent = await lab.componentStatus('agent', n.name);
          const proxy = await lab.componentStatus('proxy', n.name);
          nodes.push({
            name: n.name,
            address: n.address,
            agent: { running: agent.running, ready: agent.ready, detail: agent.detail },
            proxy: { running: proxy.running, ready: proxy.ready, detail: proxy.detail },
          });
        }
        const pods = [];
        for (const pod of await lab.api.list('Pod')) {
          const key = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
          const st = lab.state.pods[key];
          // A failed read is shown as such, never as "none": an unreadable netns is not an unredirected pod.
          let redirection: string;
          if (!st?.netns || st.hostNetwork) redirection = 'none';
          else if (!fs.existsSync(`/run/netns/${st.netns}`)) redirection = `unknown (netns ${st.netns} is gone)`;
          else {
            redirection = await observeIn(st.netns, ['iptables-save']).then(
              (save) => (REDIRECT_RULE.test(save) ? 'enabled' : 'none'),
              (e: unknown) =>
                `unknown (iptables-save failed: ${e instanceof Error ? e.message.split('\n')[0] : String(e)})`,
            );
          }
          pods.push({
            pod: key,
            node: pod.spec?.nodeName ?? '',
            phase: pod.status?.phase ?? '',
            ips: (pod.status?.podIPs ?? []).map((x) => x.ip),
            annotation: pod.metadata?.annotations?.[REDIRECTION_STATUS] ?? '-',
            redirection,
            netns: st?.netns ?? '-',
          });
        }
        if (opts.json) {
          process.stdout.write(
            `${JSON.stringify({ name: lab.state.name, prefix: lab.state.prefix, profile: lab.state.profile, nodes, pods }, null, 2)}\n`,
          );
          return;
        }
        const lines = [
          `ambient-lab ${lab.state.name} (prefix ${lab.state.prefix}, profile ${lab.state.profile})`,
          '',
          'NODE      ADDRESS        AGENT                 PROXY',
        ];
        for (const n of nodes) {
          const c = (x: { running: boolean; ready: boolean }): string =>
            !x.running ? 'stopped' : x.ready ? 'ready' : 'not ready';
          lines.push(`${n.name.padEnd(9)} ${n.address.padEnd(14)} ${c(n.agent).padEnd(21)} ${c(n.proxy)}`);
        }
        lines.push('', 'POD                          NODE      PHASE     IP            ANNOTATION  REDIRECTION');
        for (const p of pods)
          lines.push(
            `${p.pod.padEnd(28)} ${p.node.padEnd(9)} ${p.phase.padEnd(9)} ${(p.ips[0] ?? '-').padEnd(13)} ${p.annotation.padEnd(11)} ${p.redirection}`,
          );
        process.stdout.write(`${lines.join('\n')}\n`);
      });
  },
};
