/** The registry of CLI commands, in the order `--help` lists them. One line per command. */
import type { CliCommand } from '../command.js';

export const commands: readonly CliCommand[] = [];
