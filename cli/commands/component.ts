/**
 * `ambient-lab component stop|start|restart agent|proxy --node N`, `ambient-lab node reboot N`
 * and `ambient-lab api fault on|off [--node N]`: the failures the attack catalog stages, by hand,
 * on a cluster made by `ambient-lab up`, through its daemon. A reboot stops both components, drops
 * every pod sandbox of the node without CNI DEL and starts it all again; the API fault makes the
 * CNI plugin's Kubernetes API calls fail on the node (or every node): refused (`--mode
 * unreachable`, the default) or answered 500 (`--mode error`).
 */
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { EXIT_CODES_HELP, UsageError } from '../errors.js';
import { controlLab, DEFAULT_LAB, printResult } from './lab-common.js';

export const componentCommand: CliCommand = {
  name: 'component',
  register(program: Command): void {
    program
      .command('component')
      .description('stop, start or restart a node agent or node proxy of a cluster made by `ambient-lab up`')
      .argument('<action>', 'stop, start or restart')
      .argument('<component>', 'agent or proxy')
      .requiredOption('--node <node>', 'the node')
      .option('--name <lab>', 'lab name', DEFAULT_LAB)
      .option('--json', 'print the answer as JSON')
      .addHelpText('after', `\n${EXIT_CODES_HELP}`)
      .action(async (action: string, component: string, o: { node: string; name: string; json?: boolean }) => {
        printResult(
          await controlLab('component', o.name, { op: 'component', action, component, node: o.node }),
          o.json,
        );
      });
  },
};

export const nodeCommand: CliCommand = {
  name: 'node',
  register(program: Command): void {
    program
      .command('node')
      .description('reboot a node of a cluster made by `ambient-lab up`')
      .argument('<action>', 'reboot')
      .argument('<node>', 'the node')
      .option('--name <lab>', 'lab name', DEFAULT_LAB)
      .option('--json', 'print the answer as JSON')
      .addHelpText('after', `\n${EXIT_CODES_HELP}`)
      .action(async (action: string, node: string, o: { name: string; json?: boolean }) => {
        if (action !== 'reboot') throw new UsageError(`node ${JSON.stringify(action)}: expected reboot`);
        printResult(await controlLab('node reboot', o.name, { op: 'node-reboot', node }), o.json);
      });
  },
};

export const apiCommand: CliCommand = {
  name: 'api',
  register(program: Command): void {
    program
      .command('api')
      .description("make the CNI plugin's Kubernetes API calls fail (on) or work again (off)")
      .argument('<fault>', 'fault')
      .argument('<state>', 'on or off')
      .option('--node <node>', 'only this node (default: every node)')
      .option('--mode <mode>', 'unreachable (every call refused) or error (every call answers 500)', 'unreachable')
      .option('--name <lab>', 'lab name', DEFAULT_LAB)
      .option('--json', 'print the answer as JSON')
      .addHelpText('after', `\n${EXIT_CODES_HELP}`)
      .action(
        async (fault: string, state: string, o: { node?: string; mode: string; name: string; json?: boolean }) => {
          if (fault !== 'fault') throw new UsageError(`api ${JSON.stringify(fault)}: expected \`api fault on|off\``);
          if (state !== 'on' && state !== 'off')
            throw new UsageError(`api fault ${JSON.stringify(state)}: expected on or off`);
          printResult(
            await controlLab('api fault', o.name, {
              op: 'api-fault',
              failing: state === 'on',
              mode: o.mode,
              ...(o.node !== undefined ? { node: o.node } : {}),
            }),
            o.json,
          );
        },
      );
  },
};
