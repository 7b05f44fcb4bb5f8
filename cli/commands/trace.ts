/**
 * `ambient-lab trace LABFILE`: run a lab file's connection attempts through the simulated kernel
 * and print, for each, the outcome, the socket that accepted it, the original destination that
 * socket reads, the source it sees, and the packet trace.
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { renderTraceHtml } from '../html/trace-html.js';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { EXIT_DIFFERS, HarnessError, UsageError } from '../errors.js';
import { LabError, parseLab, type Lab } from '../../sim/lab/lab-file.js';
import { runLab, type AttemptResult, type LabRun, type ListenerResult } from '../../sim/lab/run-lab.js';
import { renderTrace } from '../../sim/kernel/trace.js';

function formatAttempt(r: AttemptResult, withTrace: boolean): string {
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

/** Every lab socket's outcome, one line each; one whose outcome is not its `expect` says so. */
function formatListeners(ls: readonly ListenerResult[]): string {
  if (ls.length === 0) return '';
  const width = Math.max(...ls.map((l) => l.name.length));
  const lines = ls.map((l) => {
    const note =
      l.outcome === l.expected
        ? l.expected === 'listening'
          ? ''
          : ' (as expected)'
        : ` — NOT AS EXPECTED: expect ${l.expected}`;
    return `   ${l.name.padEnd(width)}  ${l.outcome}${note}${l.detail ? `: ${l.detail}` : ''}`;
  });
  return `== listeners\n${lines.join('\n')}\n\n`;
}

/** Listeners whose outcome is not what their `expect` says (exit 1). */
function unexpectedListeners(ls: readonly ListenerResult[]): ListenerResult[] {
  return ls.filter((l) => l.outcome !== l.expected);
}

/** The `format` tag of `trace --json` (schema: docs/schemas/trace-report.schema.json). */
export const TRACE_REPORT_FORMAT = 'ambient-lab/trace@1';

/** `--html FILE`: a file path in an existing directory, not a directory itself. */
function htmlFileOf(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  const isDir = (p: string): boolean | undefined => {
    try {
      return statSync(p).isDirectory();
    } catch {
      return undefined;
    }
  };
  if (file === '' || isDir(file) === true)
    throw new UsageError(`--html ${JSON.stringify(file)}: give the path of the HTML file to write, not a directory`);
  const dir = path.dirname(file);
  if (isDir(dir) !== true)
    throw new UsageError(`--html ${JSON.stringify(file)}: directory ${dir} does not exist; create it first`);
  return file;
}

/** Read, parse and run a lab file; every problem with the file itself is a usage error (exit 2). */
function loadAndRun(labfile: string, only: string | undefined): { lab: Lab; run: LabRun } {
  let text: string;
  try {
    text = readFileSync(labfile, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(
      `cannot read lab file ${labfile}: ${code ?? (e as Error).message}${code === 'ENOENT' ? ' (no such file)' : ''}; see docs/lab-file.md and fixtures/labs/`,
      { cause: e },
    );
  }
  try {
    const lab = parseLab(text, labfile);
    const names = lab.attempts.map((a) => a.name);
    if (only !== undefined && !names.includes(only))
      throw new UsageError(
        `--only ${JSON.stringify(only)}: no attempt of that name in ${labfile}; accepted: ${names.join(', ')}`,
      );
    // Errors in rule text, routes and addresses surface while the lab is built, as LabErrors too.
    return { lab, run: runLab(lab, labfile) };
  } catch (e) {
    if (e instanceof LabError) throw new UsageError(e.message, { cause: e });
    throw e;
  }
}

/** The attempts as JSON prints them: without their packet traces under --no-packets. */
function withPackets(results: readonly AttemptResult[], packets: boolean): readonly object[] {
  return packets ? results : results.map(({ trace, ...rest }) => (void trace, rest));
}

export const traceCommand: CliCommand = {
  name: 'trace',
  register(program: Command): void {
    program
      .command('trace')
      .description(
        'run a lab file (YAML: namespaces, links, routes, rules, iptables text, sockets, connection attempts) in the simulated kernel and trace every attempt',
      )
      .argument('<labfile>', 'lab file; see docs/lab-file.md and fixtures/labs/')
      .option('--json', 'print machine-readable JSON instead of text')
      .option('--only <name>', 'run all attempts but print only this one')
      .option('--no-packets', 'omit the packet traces (text and JSON)')
      .option(
        '--html <file>',
        "also write a self-contained HTML page of the simulated run: each attempt's packet path drawn across namespaces, hooks, tables, chains and rules",
      )
      .option(
        '--kernel',
        'also run the lab on the real kernel (root; private namespaces) and print every difference from the simulation',
      )
      .addHelpText(
        'after',
        [
          '',
          'Exit codes:',
          '  0  the lab ran, every listener as its `expect` says (with --kernel: the kernel agreed with the simulation, or every difference is a known divergence)',
          "  1  a listener's outcome is not its `expect`; with --kernel: the kernel and the simulation differ beyond the known divergences (docs/lab-file.md)",
          '  2  usage error: bad flag, unreadable lab file, or an error in it (with its line and column)',
          '  3  harness error: --kernel without root, or the kernel lab could not be built',
        ].join('\n'),
      )
      .action(
        async (
          labfile: string,
          opts: { json?: boolean; only?: string; packets: boolean; kernel?: boolean; html?: string },
        ) => {
          const htmlFile = htmlFileOf(opts.html);
          const { lab, run } = loadAndRun(labfile, opts.only);
          let results = run.results;
          if (opts.only !== undefined) {
            results = results.filter((r) => r.name === opts.only);
            if (results.length === 0)
              throw new UsageError(
                `--only ${JSON.stringify(opts.only)}: no attempt of that name in ${labfile}; accepted: ${run.results.map((r) => r.name).join(', ')}`,
              );
          }
          if (htmlFile !== undefined) {
            writeFileSync(htmlFile, renderTraceHtml(labfile, run.listeners, results));
            process.stderr.write(`trace: HTML report: ${htmlFile}\n`);
          }
          if (opts.kernel) {
            if (process.getuid?.() !== 0)
              throw new HarnessError(
                'trace --kernel runs the lab in real network namespaces and needs root: run it as root, or drop --kernel',
              );
            (await import('../../e2e/netns/required-tools.js')).requireTools('trace --kernel');
            // Loaded only when asked: the real-kernel world is not needed for simulation.
            const { runLabOnKernel } = await import('../../e2e/netns/lab-runner.js');
            const { compareListeners, compareResults, formatDifferences } =
              await import('../../scenarios/fidelity/compare.js');
            const { classifyDifferences, formatKnownDifferences } =
              await import('../../scenarios/fidelity/known-divergences.js');
            const kernelRun = await runLabOnKernel(lab);
            const udp = new Set(lab.attempts.filter((a) => a.proto === 'udp').map((a) => a.name));
            const names = new Set(results.map((r) => r.name));
            const kr = kernelRun.results.filter((r) => names.has(r.name));
            const { differences: diffs, unexplained } = classifyDifferences(
              lab,
              [...compareListeners(run.listeners, kernelRun.listeners), ...compareResults(results, kr, udp)],
              results,
              kr,
            );
            if (opts.json) {
              process.stdout.write(
                JSON.stringify(
                  {
                    format: TRACE_REPORT_FORMAT,
                    lab: labfile,
                    world: 'sim+kernel',
                    kernel: lab.kernel,
                    listeners: run.listeners,
                    kernelListeners: kernelRun.listeners,
                    attempts: withPackets(results, opts.packets),
                    kernelAttempts: withPackets(kr, opts.packets),
                    differences: diffs,
                  },
                  null,
                  2,
                ) + '\n',
              );
            } else {
              process.stdout.write(formatListeners(run.listeners));
              process.stdout.write(results.map((r) => formatAttempt(r, opts.packets)).join('\n\n') + '\n\n');
              process.stdout.write(formatDifferences(unexplained, results, kr) + '\n');
              const known = formatKnownDifferences(diffs);
              if (known !== '') process.stdout.write(known + '\n');
            }
            // A difference a documented divergence explains is the model's known limit, not a failure.
            if (unexplained.length > 0 || unexpectedListeners(run.listeners).length > 0)
              process.exitCode = EXIT_DIFFERS;
            return;
          }
          if (unexpectedListeners(run.listeners).length > 0) process.exitCode = EXIT_DIFFERS;
          if (opts.json) {
            process.stdout.write(
              JSON.stringify(
                {
                  format: TRACE_REPORT_FORMAT,
                  lab: labfile,
                  world: 'sim',
                  kernel: lab.kernel,
                  listeners: run.listeners,
                  attempts: withPackets(results, opts.packets),
                },
                null,
                2,
              ) + '\n',
            );
            return;
          }
          process.stdout.write(formatListeners(run.listeners));
          process.stdout.write(results.map((r) => formatAttempt(r, opts.packets)).join('\n\n') + '\n');
        },
      );
  },
};
