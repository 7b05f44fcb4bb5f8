/** Builds the `ambient-lab` program: global options, version, and every registered command. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { Command } from 'commander';
import { commands } from './commands/index.js';

export function packageVersion(): string {
  // cli/ sits one level under the package root in source and two levels under it in dist/.
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    const candidate = path.join(dir, 'package.json');
    try {
      const pkg = JSON.parse(readFileSync(candidate, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'ambient-lab' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not here; keep walking up
    }
    dir = path.dirname(dir);
  }
  throw new Error('cannot find ambient-lab package.json above the CLI module; is the package installed intact?');
}

export function buildProgram(): Command {
  const program = new Command('ambient-lab')
    .description(
      'Reference ambient-mode (node-proxy) traffic capture for Kubernetes, and the harness that proves it safe:\n'
      + 'simulated and real-kernel worlds, property checks that search for ways to bypass the node proxy.',
    )
    .version(packageVersion(), '-V, --version', 'print the ambient-lab version')
    .showHelpAfterError('(run with --help for usage)')
    .configureHelp({ sortSubcommands: false });
  for (const c of commands) c.register(program);
  return program;
}
