/** The registry of CLI commands, in the order `--help` lists them. One line per command. */
import type { CliCommand } from '../command.js';
import { traceCommand } from './trace.js';
import { checkCommand } from './check.js';
import { upCommand } from './up.js';
import { statusCommand } from './status.js';
import { execCommand } from './exec.js';
import { downCommand } from './down.js';

export const commands: readonly CliCommand[] = [
  checkCommand,
  traceCommand,
  upCommand,
  statusCommand,
  execCommand,
  downCommand,
];
