/**
 * A CLI command is one module that attaches itself to the program. Adding a command means
 * adding one file under cli/commands/ and one line to cli/commands/index.ts.
 */
import type { Command } from 'commander';

export interface CliCommand {
  /** Name as typed by the user; must match the commander command it registers. */
  readonly name: string;
  register(program: Command): void;
}
