/**
 * `ambient-lab policy apply FILE` and `policy delete NAMESPACE/NAME`: Istio AuthorizationPolicies
 * (security.istio.io/v1) of a cluster made by `ambient-lab up`, through its daemon. FILE is YAML
 * or JSON with one or more policy documents; each is checked before any is sent.
 */
import * as fs from 'node:fs';
import type { Command } from 'commander';
import { parseAllDocuments } from 'yaml';
import type { CliCommand } from '../command.js';
import { EXIT_CODES_HELP, UsageError } from '../errors.js';
import { parseLabRequest, LabRequestError } from '../../e2e/netns/lab-control.js';
import { controlLab, DEFAULT_LAB, podRefOf, printResult } from './lab-common.js';

/** The policy documents of FILE; any problem is a UsageError naming the file (and document). */
function policiesOf(file: string): Record<string, unknown>[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(
      `cannot read policy file ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
  const docs = parseAllDocuments(text);
  const out: Record<string, unknown>[] = [];
  docs.forEach((d, i) => {
    if (d.errors.length > 0) throw new UsageError(`${file}: document ${i + 1}: ${d.errors[0]!.message}`);
    const v: unknown = d.toJS();
    if (v === null || v === undefined) return;
    try {
      parseLabRequest({ op: 'policy-apply', policy: v });
    } catch (e) {
      if (e instanceof LabRequestError) throw new UsageError(`${file}: document ${i + 1}: ${e.message}`);
      throw e;
    }
    out.push(v as Record<string, unknown>);
  });
  if (out.length === 0) throw new UsageError(`${file}: no policy document in it`);
  return out;
}

export const policyCommand: CliCommand = {
  name: 'policy',
  register(program: Command): void {
    const policy = program
      .command('policy')
      .description('apply or delete AuthorizationPolicies of a cluster made by `ambient-lab up`');
    policy
      .command('apply')
      .description('create or replace the AuthorizationPolicies in FILE (YAML or JSON)')
      .argument('<file>', 'policy file')
      .option('--name <lab>', 'lab name', DEFAULT_LAB)
      .option('--json', 'print the answers as JSON')
      .addHelpText('after', `\n${EXIT_CODES_HELP}`)
      .action(async (file: string, o: { name: string; json?: boolean }) => {
        for (const p of policiesOf(file))
          printResult(await controlLab('policy apply', o.name, { op: 'policy-apply', policy: p }), o.json);
      });
    policy
      .command('delete')
      .description('delete an AuthorizationPolicy')
      .argument('<policy>', 'NAMESPACE/NAME')
      .option('--name <lab>', 'lab name', DEFAULT_LAB)
      .option('--json', 'print the answer as JSON')
      .action(async (arg: string, o: { name: string; json?: boolean }) => {
        if (!arg.includes('/')) throw new UsageError(`policy ${JSON.stringify(arg)}: expected NAMESPACE/NAME`);
        printResult(await controlLab('policy delete', o.name, { op: 'policy-delete', ...podRefOf(arg) }), o.json);
      });
  },
};
