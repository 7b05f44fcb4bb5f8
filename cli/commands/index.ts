/** The registry of CLI commands, in the order `--help` lists them. One line per command. */
import type { CliCommand } from '../command.js';
import { traceCommand } from './trace.js';
import { checkCommand } from './check.js';
import { upCommand } from './up.js';
import { statusCommand } from './status.js';
import { execCommand } from './exec.js';
import { downCommand } from './down.js';
import { podCommand } from './pod.js';
import { annotateCommand, labelCommand } from './label.js';
import { policyCommand } from './policy.js';
import { apiCommand, componentCommand, nodeCommand } from './component.js';
import { logsCommand } from './logs.js';

export const commands: readonly CliCommand[] = [
  checkCommand,
  traceCommand,
  upCommand,
  statusCommand,
  execCommand,
  podCommand,
  labelCommand,
  annotateCommand,
  policyCommand,
  componentCommand,
  nodeCommand,
  apiCommand,
  logsCommand,
  downCommand,
];
