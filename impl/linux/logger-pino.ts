/**
 * Real adapter of the Logger port: pino JSON lines (to stderr by default, as CNI plugins must).
 * Lines carry the level by name (`"level":"info"`), as operators read and filter them; the
 * fields of each decision line are documented in docs/observability.md.
 *
 * The level can change while the process runs (the proxy's admin `/logging`, the agent's status
 * socket): every child shares one LogLevelControl, so a change reaches the loggers the
 * components already hold (pino's own children copy their parent's level when made).
 */
import { pino, type Logger as Pino } from 'pino';
import type { LogFields, Logger } from '../host/log.js';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
const RANK: Readonly<Record<LogLevel, number>> = { debug: 20, info: 30, warn: 40, error: 50 };

export function isLogLevel(s: string): s is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(s);
}

/** The one mutable level of a process's loggers. */
export class LogLevelControl {
  constructor(private current: LogLevel) {}
  get level(): LogLevel {
    return this.current;
  }
  set(level: LogLevel): void {
    this.current = level;
  }
  enabled(level: LogLevel): boolean {
    return RANK[level] >= RANK[this.current];
  }
}

class PinoLogger implements Logger {
  constructor(
    private readonly p: Pino,
    private readonly control: LogLevelControl,
  ) {}
  debug(msg: string, fields: LogFields = {}): void {
    if (this.control.enabled('debug')) this.p.debug(fields, msg);
  }
  info(msg: string, fields: LogFields = {}): void {
    if (this.control.enabled('info')) this.p.info(fields, msg);
  }
  warn(msg: string, fields: LogFields = {}): void {
    if (this.control.enabled('warn')) this.p.warn(fields, msg);
  }
  error(msg: string, fields: LogFields = {}): void {
    if (this.control.enabled('error')) this.p.error(fields, msg);
  }
  child(fields: LogFields): Logger {
    return new PinoLogger(this.p.child(fields), this.control);
  }
}

/** A pino logger writing to `fd`; `control` (made from `level` when absent) sets its level at run time. */
export function pinoLogger(opts: {
  name: string;
  level?: LogLevel;
  control?: LogLevelControl;
  fd?: 1 | 2;
  /** Where lines go instead of `fd` (tests). */
  write?: (line: string) => void;
}): Logger {
  const control = opts.control ?? new LogLevelControl(opts.level ?? 'info');
  const write = opts.write;
  const destination = write ? { write: (s: string) => write(s) } : pino.destination({ fd: opts.fd ?? 2, sync: true });
  // pino filters nothing (debug); LogLevelControl decides, so one change reaches every child.
  const p = pino(
    { name: opts.name, level: 'debug', formatters: { level: (label) => ({ level: label }) } },
    destination,
  );
  return new PinoLogger(p, control);
}
