/** `ambient-lab down [--name NAME]`: stop the lab's processes (by recorded pid), remove its namespaces (by prefix). Safe to run twice. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { NetnsLab } from '../../e2e/netns/world-lab.js';
import { DEFAULT_LAB, labDir, requireRoot } from './lab-common.js';
import { EXIT_CODES_HELP } from '../errors.js';

export const downCommand: CliCommand = {
  name: 'down',
  register(program: Command): void {
    program
      .command('down')
      .description('remove a cluster made by `ambient-lab up` (processes by recorded pid, namespaces by run prefix)')
      .option('--name <name>', 'lab name', DEFAULT_LAB)
      .addHelpText('after', `\n${EXIT_CODES_HELP}`)
      .action(async (opts: { name: string }) => {
        const dir = labDir(opts.name);
        requireRoot('down');
        if (!fs.existsSync(path.join(dir, 'state.json'))) {
          process.stdout.write(
            `ambient-lab ${opts.name} is not up (no ${path.join(dir, 'state.json')}); nothing to do\n`,
          );
          return;
        }
        const lab = NetnsLab.attach(dir);
        await lab.destroy();
        process.stdout.write(
          `ambient-lab ${opts.name} is down: processes stopped, namespaces ${lab.state.prefix}* removed\n`,
        );
      });
  },
};
