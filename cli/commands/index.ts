/** The registry of CLI commands, in the order `--help` lists them. One line per command. */
import type { CliCommand } from '../command.js';
import { traceCommand } from './trace.js';

export const commands: readonly CliCommand[] = [traceCommand];
