/**
 * `ambient-lab label pod|namespace TARGET KEY=VALUE... [KEY-...]` and `annotate` likewise: labels
 * and annotations of a cluster made by `ambient-lab up` (e.g. `label namespace shop
 * istio.io/dataplane-mode=ambient` enrolls its pods), through its daemon. Keys and values are
 * checked as Kubernetes checks them before anything is sent.
 */
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { EXIT_CODES_HELP, UsageError } from '../errors.js';
import { controlLab, DEFAULT_LAB, keyValues, podRefOf, printResult } from './lab-common.js';

function register(program: Command, op: 'label' | 'annotate'): void {
  const what = op === 'label' ? 'label' : 'annotation';
  program
    .command(op)
    .description(
      `set (KEY=VALUE) or remove (KEY-) ${what}s of a pod or namespace of a cluster made by \`ambient-lab up\``,
    )
    .argument('<kind>', 'pod or namespace')
    .argument('<target>', 'pod: NAMESPACE/NAME (or NAME in demo); namespace: NAME')
    .argument('<changes...>', 'KEY=VALUE or KEY-')
    .option('--name <lab>', 'lab name', DEFAULT_LAB)
    .option('--json', 'print the answer as JSON')
    .addHelpText('after', `\n${EXIT_CODES_HELP}`)
    .action(async (kind: string, target: string, changes: string[], o: { name: string; json?: boolean }) => {
      if (kind !== 'pod' && kind !== 'namespace')
        throw new UsageError(`${op} ${JSON.stringify(kind)}: expected pod or namespace`);
      const values = keyValues(changes, what);
      const ref = kind === 'pod' ? podRefOf(target) : { name: target };
      printResult(await controlLab(op, o.name, { op, kind, ...ref, values }), o.json);
    });
}

export const labelCommand: CliCommand = { name: 'label', register: (p) => register(p, 'label') };
export const annotateCommand: CliCommand = { name: 'annotate', register: (p) => register(p, 'annotate') };
