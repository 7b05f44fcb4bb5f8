/** `ambient-lab down [--name NAME]`: the cluster's daemon stops the lab's processes (by recorded pid) and removes its namespaces (by prefix), then ends. Safe to run twice. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { NetnsLab } from '../../e2e/netns/world-lab.js';
import { DEFAULT_LAB, labDir, requireRoot } from './lab-common.js';
import { EXIT_CODES_HELP } from '../errors.js';
import { controlSocketOf, labControl, LabDaemonUnavailable } from '../../e2e/netns/lab-control.js';

/**
 * End the daemon recorded in DIR/daemon.pid, if that pid is still a lab daemon (never another
 * process). SIGKILL, not SIGTERM: on SIGTERM it would take the cluster down too, racing this
 * process doing the same.
 */
function stopDaemon(dir: string): void {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(path.join(dir, 'daemon.pid'), 'utf8').trim());
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (!cmdline.includes('lab-daemon-main')) return;
  } catch {
    return; // no record, or the process is gone
  }
  process.kill(pid, 'SIGKILL');
}

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
        // the daemon that keeps the cluster takes it down and ends; without one (it crashed, or
        // never answers), this process does it and ends the daemon by its recorded pid
        let how = 'by its daemon';
        try {
          await labControl(controlSocketOf(dir), { op: 'down' }, 120_000);
        } catch (e) {
          how = `here (${e instanceof LabDaemonUnavailable ? 'no daemon answered' : `its daemon failed: ${(e as Error).message}`})`;
          stopDaemon(dir);
          await lab.destroy();
        }
        process.stdout.write(
          `ambient-lab ${opts.name} is down (${how}): processes stopped, namespaces ${lab.state.prefix}* removed\n`,
        );
      });
  },
};
