/**
 * A Logger for many short sim histories: keeps warnings and errors (the last `limit`), drops
 * debug and info — a full MemoryLogger allocates an entry per log call, which shows up as
 * garbage-collector time when thousands of worlds run. Pass `verbose` to keep everything.
 */
import type { LogFields, Logger } from '../../../impl/host/log.js';
import type { LogEntry } from '../../../sim/log/memory-logger.js';

export class QuietLogger implements Logger {
  constructor(
    readonly entries: LogEntry[] = [],
    private readonly opts: { readonly verbose: boolean; readonly limit: number } = { verbose: false, limit: 1000 },
    private readonly base: LogFields = {},
  ) {}

  private keep(level: LogEntry['level'], msg: string, fields: LogFields): void {
    this.entries.push({ level, msg, fields: { ...this.base, ...fields } });
    if (this.entries.length > this.opts.limit) this.entries.splice(0, this.entries.length - this.opts.limit);
  }

  debug(msg: string, fields: LogFields = {}): void {
    if (this.opts.verbose) this.keep('debug', msg, fields);
  }
  info(msg: string, fields: LogFields = {}): void {
    if (this.opts.verbose) this.keep('info', msg, fields);
  }
  warn(msg: string, fields: LogFields = {}): void {
    this.keep('warn', msg, fields);
  }
  error(msg: string, fields: LogFields = {}): void {
    this.keep('error', msg, fields);
  }
  child(fields: LogFields): Logger {
    return new QuietLogger(this.entries, this.opts, { ...this.base, ...fields });
  }
}
