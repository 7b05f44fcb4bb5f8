/** A Logger (impl/host/log.ts) that keeps entries in memory, for the sim and for assertions. */
import type { LogFields, Logger } from '../../impl/host/log.js';

export interface LogEntry {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly msg: string;
  readonly fields: LogFields;
}

export class MemoryLogger implements Logger {
  constructor(
    readonly entries: LogEntry[] = [],
    private readonly base: LogFields = {},
  ) {}

  debug(msg: string, fields: LogFields = {}): void {
    this.entries.push({ level: 'debug', msg, fields: { ...this.base, ...fields } });
  }
  info(msg: string, fields: LogFields = {}): void {
    this.entries.push({ level: 'info', msg, fields: { ...this.base, ...fields } });
  }
  warn(msg: string, fields: LogFields = {}): void {
    this.entries.push({ level: 'warn', msg, fields: { ...this.base, ...fields } });
  }
  error(msg: string, fields: LogFields = {}): void {
    this.entries.push({ level: 'error', msg, fields: { ...this.base, ...fields } });
  }
  child(fields: LogFields): Logger {
    return new MemoryLogger(this.entries, { ...this.base, ...fields });
  }
}
