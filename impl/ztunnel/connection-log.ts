/**
 * The connection log: one JSON line per connection event (accepted, forwarded, denied, failed,
 * closed, closed-by-policy) with both 4-tuples and both identities — the witness the property
 * checks read in the real worlds. Public API:
 *
 *   ConnectionLogRecord                 — the line's shape (version 1)
 *   ConnectionLogSink { write(record) } — where records go (a port-like sink)
 *   formatRecord(r): string             — validated JSON + "\n"
 *   validateRecord(x, where?): ConnectionLogRecord — throws ConnectionLogError naming the field
 *   parseConnectionLog(text): { records, errors } — every line; a bad line is an error entry,
 *                                       never skipped silently
 *   LineConnectionLog(clock, writeLine)  — implements the datapath's ProxyConnectionLog
 *                                       (proxy-deps.ts): adds the Clock time, parses its
 *                                       "ip:port" / "[v6]:port" strings, writes one line
 *   MemoryConnectionLogSink             — keeps records (tests, the sim witness)
 *
 * Consistency rules the validator enforces (so a witness cannot quietly lie): 'forwarded' has
 * an upstream tuple; inbound-hbone 'forwarded' has a source identity; 'denied' and
 * 'closed-by-policy' never carry decision.allow === true, 'closed-by-policy' must carry a
 * decision, 'forwarded' never carries decision.allow === false; identities are SPIFFE URIs; ports are
 * 0..65535; addresses parse.
 */
import type { Clock } from '../host/clock.js';
import { isIpAddress } from '../api/ip/address.js';
import type { ConnectionDirection, ConnectionEvent, ProxyConnectionLog, ProxyConnectionRecord } from './proxy-deps.js';

export const CONNECTION_LOG_VERSION = 1;

type LogEvent = ConnectionEvent;
const LOG_EVENTS: readonly LogEvent[] = ['accepted', 'forwarded', 'denied', 'failed', 'closed', 'closed-by-policy'];
const LOG_DIRECTIONS: readonly ConnectionDirection[] = ['outbound', 'inbound-plaintext', 'inbound-hbone'];

interface Endpoint {
  readonly ip: string;
  readonly port: number;
}

interface FourTuple {
  readonly src: Endpoint;
  readonly dst: Endpoint;
}

export interface ConnectionLogRecord {
  readonly v: typeof CONNECTION_LOG_VERSION;
  /** Clock port time in ms (monotonic, arbitrary epoch). */
  readonly time: number;
  readonly event: LogEvent;
  readonly direction: ConnectionDirection;
  /** The pod whose proxy handled it ("ns/name" or uid, as the datapath names it). */
  readonly pod: string;
  /** client → proxy, as accepted. */
  readonly downstream: FourTuple;
  /** Where the client meant to go (original destination / CONNECT authority). */
  readonly target?: Endpoint;
  /** proxy → upstream, as opened. */
  readonly upstream?: FourTuple;
  readonly srcIdentity?: string;
  readonly dstIdentity?: string;
  readonly mode?: 'hbone' | 'passthrough' | 'plaintext';
  readonly decision?: { readonly allow: boolean; readonly reason: string };
  readonly reason?: string;
  readonly bytesSent?: number;
  readonly bytesReceived?: number;
}

interface ConnectionLogSink {
  write(record: ConnectionLogRecord): void;
}

class ConnectionLogError extends Error {
  override readonly name = 'ConnectionLogError';
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

const KEYS = new Set([
  'v',
  'time',
  'event',
  'direction',
  'pod',
  'downstream',
  'target',
  'upstream',
  'srcIdentity',
  'dstIdentity',
  'mode',
  'decision',
  'reason',
  'bytesSent',
  'bytesReceived',
]);
const SPIFFE = /^spiffe:\/\/[^/\s]+\/ns\/[^/\s]+\/sa\/[^/\s]+$/;

export function validateRecord(x: unknown, where = 'connection log record'): ConnectionLogRecord {
  const fail = (field: string, msg: string): never => {
    throw new ConnectionLogError(`${where}: ${field}: ${msg}`);
  };
  if (!isObj(x)) return fail('<root>', 'expected a JSON object');
  for (const k of Object.keys(x)) if (!KEYS.has(k)) fail(k, 'unknown field');
  if (x['v'] !== CONNECTION_LOG_VERSION) fail('v', `expected ${CONNECTION_LOG_VERSION}, got ${JSON.stringify(x['v'])}`);
  const time = x['time'];
  if (typeof time !== 'number' || !Number.isFinite(time) || time < 0)
    fail('time', 'expected a non-negative number (Clock ms)');
  if (!LOG_EVENTS.includes(x['event'] as LogEvent)) fail('event', `expected one of ${LOG_EVENTS.join(', ')}`);
  if (!LOG_DIRECTIONS.includes(x['direction'] as ConnectionDirection))
    fail('direction', `expected one of ${LOG_DIRECTIONS.join(', ')}`);
  if (typeof x['pod'] !== 'string' || x['pod'] === '') fail('pod', 'expected a non-empty string');
  const endpoint = (v: unknown, f: string): void => {
    if (!isObj(v)) return fail(f, 'expected {ip, port}');
    if (typeof v['ip'] !== 'string' || !isIpAddress(v['ip']))
      fail(`${f}.ip`, `not an IP address: ${JSON.stringify(v['ip'])}`);
    const port = v['port'];
    if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535)
      fail(`${f}.port`, 'expected an integer 0..65535');
  };
  const tuple = (v: unknown, f: string): void => {
    if (!isObj(v)) return fail(f, 'expected {src, dst}');
    endpoint(v['src'], `${f}.src`);
    endpoint(v['dst'], `${f}.dst`);
  };
  tuple(x['downstream'], 'downstream');
  if (x['target'] !== undefined) endpoint(x['target'], 'target');
  if (x['upstream'] !== undefined) tuple(x['upstream'], 'upstream');
  for (const f of ['srcIdentity', 'dstIdentity']) {
    const v = x[f];
    if (v !== undefined && (typeof v !== 'string' || !SPIFFE.test(v)))
      fail(f, `expected spiffe://<trust-domain>/ns/<ns>/sa/<sa>, got ${JSON.stringify(v)}`);
  }
  if (x['mode'] !== undefined && !['hbone', 'passthrough', 'plaintext'].includes(x['mode'] as string))
    fail('mode', 'expected hbone, passthrough or plaintext');
  const d = x['decision'];
  if (d !== undefined && (!isObj(d) || typeof d['allow'] !== 'boolean' || typeof d['reason'] !== 'string'))
    fail('decision', 'expected {allow: boolean, reason: string}');
  if (x['reason'] !== undefined && typeof x['reason'] !== 'string') fail('reason', 'expected a string');
  for (const f of ['bytesSent', 'bytesReceived']) {
    const v = x[f];
    if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < 0))
      fail(f, 'expected a non-negative integer');
  }
  const event = x['event'] as LogEvent;
  if (event === 'forwarded' && x['upstream'] === undefined) fail('upstream', "required for a 'forwarded' record");
  if (event === 'forwarded' && x['direction'] === 'inbound-hbone' && x['srcIdentity'] === undefined) {
    fail('srcIdentity', "required for a 'forwarded' inbound-hbone record (HBONE always has a peer identity)");
  }
  const allow = isObj(d) ? d['allow'] : undefined;
  if ((event === 'denied' || event === 'closed-by-policy') && allow === true)
    fail('decision', `a '${event}' record cannot carry decision.allow === true`);
  if (event === 'closed-by-policy' && d === undefined) fail('decision', "required for a 'closed-by-policy' record");
  if (event === 'forwarded' && allow === false)
    fail('decision', "a 'forwarded' record cannot carry decision.allow === false");
  return x as unknown as ConnectionLogRecord;
}

export function formatRecord(r: ConnectionLogRecord): string {
  validateRecord(r);
  return `${JSON.stringify(r)}\n`;
}

interface ParsedConnectionLog {
  readonly records: ConnectionLogRecord[];
  /** One entry per bad line (1-based line numbers); empty lines are allowed. */
  readonly errors: { readonly line: number; readonly message: string }[];
}

export function parseConnectionLog(text: string): ParsedConnectionLog {
  const records: ConnectionLogRecord[] = [];
  const errors: { line: number; message: string }[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let x: unknown;
    try {
      x = JSON.parse(line);
    } catch (e) {
      errors.push({ line: i + 1, message: `not JSON: ${(e as Error).message}` });
      return;
    }
    try {
      records.push(validateRecord(x, `line ${i + 1}`));
    } catch (e) {
      errors.push({ line: i + 1, message: (e as Error).message });
    }
  });
  return { records, errors };
}

/** "10.0.0.1:80" or "[fd00::1]:80" → Endpoint; throws ConnectionLogError otherwise. */
export function parseEndpoint(s: string): Endpoint {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(s) ?? /^([^:[\]]+):(\d{1,5})$/.exec(s);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !isIpAddress(m[1]!) || port > 65535) {
    throw new ConnectionLogError(
      `not an address:port: ${JSON.stringify(s)} (expected "10.0.0.1:80" or "[fd00::1]:80")`,
    );
  }
  return { ip: m[1]!, port };
}

/**
 * The datapath's ProxyConnectionLog writing validated records to a sink. 'denied' and
 * 'closed-by-policy' records get decision {allow: false, reason}; inbound 'forwarded' records
 * with a reason get decision {allow: true, reason}. A record that fails to convert
 * is written as an error line through `onError` (it must not vanish: the log is a witness).
 */
export class LineConnectionLog implements ProxyConnectionLog {
  constructor(
    private readonly clock: Clock,
    private readonly sink: ConnectionLogSink,
    /** Required: a record that cannot be written must reach an operator log, not vanish. */
    private readonly onError: (err: Error, r: ProxyConnectionRecord) => void,
  ) {}

  record(r: ProxyConnectionRecord): void {
    try {
      const tuple = (t: { src: string; dst: string }): FourTuple => ({
        src: parseEndpoint(t.src),
        dst: parseEndpoint(t.dst),
      });
      let target: Endpoint | undefined;
      try {
        target = parseEndpoint(r.target);
      } catch {
        target = undefined; // a CONNECT authority that is not an address (a rejected request) is kept in reason
      }
      const denied = r.event === 'denied' || r.event === 'closed-by-policy';
      // An inbound 'forwarded' record carries the authorization reason that let it through.
      const allowed = r.event === 'forwarded' && r.direction !== 'outbound' && r.reason !== undefined;
      const rec: ConnectionLogRecord = {
        v: CONNECTION_LOG_VERSION,
        time: this.clock.now(),
        event: r.event,
        direction: r.direction,
        pod: r.pod,
        downstream: tuple(r.downstream),
        ...(target ? { target } : {}),
        ...(r.upstream ? { upstream: tuple(r.upstream) } : {}),
        ...(r.srcIdentity !== undefined ? { srcIdentity: r.srcIdentity } : {}),
        ...(r.dstIdentity !== undefined ? { dstIdentity: r.dstIdentity } : {}),
        ...(r.mode ? { mode: r.mode } : {}),
        ...(denied ? { decision: { allow: false, reason: r.reason ?? '' } } : {}),
        ...(allowed ? { decision: { allow: true, reason: r.reason! } } : {}),
        ...(r.reason !== undefined
          ? { reason: target ? r.reason : `${r.reason} (target ${r.target})` }
          : target
            ? {}
            : { reason: `target ${r.target}` }),
        ...(r.bytesSent !== undefined ? { bytesSent: r.bytesSent } : {}),
        ...(r.bytesReceived !== undefined ? { bytesReceived: r.bytesReceived } : {}),
      };
      validateRecord(rec);
      this.sink.write(rec);
    } catch (e) {
      this.onError(e as Error, r);
    }
  }
}

/** Writes each record as one JSON line through `writeLine` (a file or stream in the real worlds). */
export class JsonLinesSink implements ConnectionLogSink {
  constructor(private readonly writeLine: (line: string) => void) {}
  write(record: ConnectionLogRecord): void {
    this.writeLine(formatRecord(record));
  }
}

export class MemoryConnectionLogSink implements ConnectionLogSink {
  readonly records: ConnectionLogRecord[] = [];
  write(record: ConnectionLogRecord): void {
    this.records.push(validateRecord(record));
  }
}
