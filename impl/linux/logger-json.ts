/**
 * A minimal JSON-lines Logger for short-lived processes (the CNI plugin), where loading pino
 * would cost more start-up time than the plugin's whole job. Same line shape as the components' pino lines (level by name).
 */
import type { LogFields, Logger } from '../host/log.js';

const LEVELS = { debug: 20, info: 30, warn: 40, error: 50 } as const;
type Level = keyof typeof LEVELS;

export class JsonLineLogger implements Logger {
  constructor(
    private readonly name: string,
    private readonly minLevel: Level = 'info',
    private readonly base: LogFields = {},
    private readonly write: (line: string) => void = (l) => process.stderr.write(l),
  ) {}

  private log(level: Level, msg: string, fields: LogFields | undefined): void {
    if (LEVELS[level] < LEVELS[this.minLevel]) return;
    this.write(JSON.stringify({ level, time: Date.now(), name: this.name, ...this.base, ...fields, msg }) + '\n');
  }

  debug(msg: string, fields?: LogFields): void {
    this.log('debug', msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.log('info', msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.log('warn', msg, fields);
  }
  error(msg: string, fields?: LogFields): void {
    this.log('error', msg, fields);
  }
  child(fields: LogFields): Logger {
    return new JsonLineLogger(this.name, this.minLevel, { ...this.base, ...fields }, this.write);
  }
}

export function parseLevel(s: string | undefined, dflt: Level): Level {
  return s === 'debug' || s === 'info' || s === 'warn' || s === 'error' ? s : dflt;
}
