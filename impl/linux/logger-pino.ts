/** Real adapter of the Logger port: pino JSON lines (to stderr by default, as CNI plugins must). */
import { pino, type Logger as Pino } from 'pino';
import type { LogFields, Logger } from '../host/log.js';

class PinoLogger implements Logger {
  constructor(private readonly p: Pino) {}
  debug(msg: string, fields: LogFields = {}): void {
    this.p.debug(fields, msg);
  }
  info(msg: string, fields: LogFields = {}): void {
    this.p.info(fields, msg);
  }
  warn(msg: string, fields: LogFields = {}): void {
    this.p.warn(fields, msg);
  }
  error(msg: string, fields: LogFields = {}): void {
    this.p.error(fields, msg);
  }
  child(fields: LogFields): Logger {
    return new PinoLogger(this.p.child(fields));
  }
}

export function pinoLogger(opts: { name: string; level?: string; fd?: 1 | 2 }): Logger {
  return new PinoLogger(
    pino({ name: opts.name, level: opts.level ?? 'info' }, pino.destination({ fd: opts.fd ?? 2, sync: true })),
  );
}
