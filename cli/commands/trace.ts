/**
 * `ambient-lab trace LABFILE`: run a lab file's connection attempts through the simulated kernel
 * and print, for each, the outcome, the socket that accepted it, the original destination that
 * socket reads, the source it sees, and the packet trace.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { parseLab } from '../../sim/lab/lab-file.js';
import { runLab, type AttemptResult } from '../../sim/lab/run-lab.js';
import { renderTrace } from '../../sim/kernel/trace.js';

export function formatAttempt(r: AttemptResult, withTrace: boolean): string {
  const lines = [`== ${r.name}: ${r.outcome}`];
  if (r.acceptedBy) lines.push(`   accepted by:     ${r.acceptedBy}`);
  if (r.originalDst) lines.push(`   original dst:    ${r.originalDst}`);
  if (r.sourceSeen) lines.push(`   source seen:     ${r.sourceSeen}`);
  if (r.localSeen) lines.push(`   local address:   ${r.localSeen}`);
  lines.push(`   why:             ${r.reason}`);
  if (withTrace && r.trace.length > 0) {
    lines.push('   trace:');
    for (const l of renderTrace(r.trace).split('\n')) lines.push(`     ${l}`);
  }
  return lines.join('\n');
}

export const traceCommand: CliCommand = {
  name: 'trace',
  register(program: Command): void {
    program
      .command('trace')
      .description('run a lab file (YAML: namespaces, links, routes, rules, iptables text, sockets, connection attempts) in the simulated kernel and trace every attempt')
      .argument('<labfile>', 'lab file; see docs/lab-file.md and fixtures/labs/')
      .option('--json', 'print machine-readable JSON instead of text')
      .option('--only <name>', 'run all attempts but print only this one')
      .option('--no-packets', 'omit the packet traces from the text output')
      .option('--kernel', 'also run the lab on the real kernel (root; private namespaces) and print every difference from the simulation')
      .action(async (labfile: string, opts: { json?: boolean; only?: string; packets: boolean; kernel?: boolean }) => {
        let text: string;
        try {
          text = readFileSync(labfile, 'utf8');
        } catch (e) {
          throw new Error(`cannot read lab file ${labfile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { cause: e });
        }
        const lab = parseLab(text, labfile);
        const run = runLab(lab, labfile);
        let results = run.results;
        if (opts.only !== undefined) {
          results = results.filter((r) => r.name === opts.only);
          if (results.length === 0) throw new Error(`no attempt named ${JSON.stringify(opts.only)} in ${labfile}; attempts: ${run.results.map((r) => r.name).join(', ')}`);
        }
        if (opts.kernel) {
          if (process.getuid?.() !== 0) throw new Error('trace --kernel runs the lab in real network namespaces and needs root: run it as root, or drop --kernel');
          (await import('../../e2e/netns/required-tools.js')).requireTools('trace --kernel');
          // Loaded only when asked: the real-kernel world is not needed for simulation.
          const { runLabOnKernel } = await import('../../e2e/netns/lab-runner.js');
          const { compareResults, formatDifferences } = await import('../../scenarios/fidelity/compare.js');
          const kernelResults = await runLabOnKernel(lab);
          const udp = new Set(lab.attempts.filter((a) => a.proto === 'udp').map((a) => a.name));
          const names = new Set(results.map((r) => r.name));
          const kr = kernelResults.filter((r) => names.has(r.name));
          const diffs = compareResults(results, kr, udp);
          if (opts.json) {
            process.stdout.write(JSON.stringify({ lab: labfile, world: 'sim+kernel', kernel: lab.kernel, attempts: results, kernelAttempts: kr, differences: diffs }, null, 2) + '\n');
          } else {
            process.stdout.write(results.map((r) => formatAttempt(r, opts.packets)).join('\n\n') + '\n\n');
            process.stdout.write(formatDifferences(diffs, results, kr) + '\n');
          }
          if (diffs.length > 0) process.exitCode = 1;
          return;
        }
        if (opts.json) {
          process.stdout.write(JSON.stringify({ lab: labfile, world: 'sim', kernel: lab.kernel, attempts: results }, null, 2) + '\n');
          return;
        }
        process.stdout.write(results.map((r) => formatAttempt(r, opts.packets)).join('\n\n') + '\n');
      });
  },
};
