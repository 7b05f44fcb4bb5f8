/**
 * `ambient-lab logs agent|proxy --node N [--follow]`: a component's log (JSON lines, level by
 * name: docs/observability.md) in a cluster made by `ambient-lab up`; --follow keeps printing
 * what it appends until interrupted, or until the cluster goes down.
 */
import * as fs from 'node:fs';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { NetnsLab } from '../../e2e/netns/world-lab.js';
import { EXIT_CODES_HELP, HarnessError, UsageError } from '../errors.js';
import { DEFAULT_LAB, labDir, requireRoot } from './lab-common.js';

export const logsCommand: CliCommand = {
  name: 'logs',
  register(program: Command): void {
    program
      .command('logs')
      .description('print the log of a node agent or node proxy of a cluster made by `ambient-lab up`')
      .argument('<component>', 'agent or proxy')
      .requiredOption('--node <node>', 'the node')
      .option('--follow', 'keep printing new lines (until interrupted, or the cluster goes down)')
      .option('--name <lab>', 'lab name', DEFAULT_LAB)
      .addHelpText('after', `\n${EXIT_CODES_HELP}`)
      .action(async (component: string, o: { node: string; follow?: boolean; name: string }) => {
        if (component !== 'agent' && component !== 'proxy')
          throw new UsageError(`logs ${JSON.stringify(component)}: expected agent or proxy`);
        const dir = labDir(o.name);
        requireRoot('logs');
        const lab = NetnsLab.attach(dir);
        if (!lab.state.nodes.some((n) => n.name === o.node))
          throw new UsageError(
            `--node ${JSON.stringify(o.node)}: no such node; nodes: ${lab.state.nodes.map((n) => n.name).join(', ')}`,
          );
        const file = `${lab.nodeDir(o.node)}/${component}.log`;
        let offset = 0;
        const drain = (): boolean => {
          let fd: number;
          try {
            fd = fs.openSync(file, 'r');
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
            throw new HarnessError(`cannot read ${file}: ${(e as Error).message}`);
          }
          try {
            const size = fs.fstatSync(fd).size;
            if (size < offset) offset = 0; // replaced (the component was restarted with a new file)
            if (size > offset) {
              const buf = Buffer.alloc(size - offset);
              fs.readSync(fd, buf, 0, buf.length, offset);
              offset = size;
              process.stdout.write(buf);
            }
          } finally {
            fs.closeSync(fd);
          }
          return true;
        };
        if (!drain()) throw new HarnessError(`no ${component} log on ${o.node} (${file}): has it started?`);
        if (!o.follow) return;
        await new Promise<void>((resolve) => {
          const timer = setInterval(() => {
            if (!drain()) {
              clearInterval(timer);
              resolve(); // the cluster went down
            }
          }, 250);
          const stop = (): void => {
            clearInterval(timer);
            resolve();
          };
          process.once('SIGINT', stop);
          process.once('SIGTERM', stop);
        });
      });
  },
};
