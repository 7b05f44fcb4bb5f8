/** Builds the `ambient-lab` program: global options, version, and every registered command. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import { Command } from 'commander';
import { commands } from './commands/index.js';
import { EXIT_CODES_HELP } from './errors.js';

function packageVersion(): string {
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
      'Reference ambient-mode (node-proxy) traffic capture for Kubernetes, and the harness that proves it safe:\n' +
        'simulated and real-kernel worlds, property checks that search for ways to bypass the node proxy.',
    )
    .version(packageVersion(), '-V, --version', 'print the ambient-lab version')
    .showHelpAfterError('(run with --help for usage)')
    .showSuggestionAfterError(true)
    // Throw instead of process.exit, so main.ts maps commander's errors to exit 2 (usage). Inherited
    // by the commands registered below.
    .exitOverride()
    .configureHelp({ sortSubcommands: false })
    .addHelpText('after', `\n${EXIT_CODES_HELP}`);
  for (const c of commands) c.register(program);
  return program;
}

/**
 * For an unknown option: the options the command does accept, so the message names the
 * accepted values as well as the wrong one.
 */
export function optionsHint(program: Command, args: readonly string[]): string {
  const first = args.find((a) => !a.startsWith('-'));
  const sub = program.commands.find((c) => c.name() === first);
  const cmd = sub ?? program;
  const flags = cmd.options.map((o) => o.long ?? o.short ?? o.flags);
  return `accepted options of ${sub ? `\`ambient-lab ${sub.name()}\`` : '`ambient-lab`'}: ${flags.join(', ')}`;
}
