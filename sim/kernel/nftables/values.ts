/**
 * Value parsers with nft's words for what fails: addresses (`1.2.3.4`, `10.0.0.0/8`, a range
 * `a-b`), numbers (decimal or 0x hex, ranges `a-b`), ports ("Service out of range" past 65535),
 * and chain priorities (a number, a standard name, or `name + N` / `name - N`).
 */
import { formatIp, tryParseIp, type Family } from '../../../impl/api/ip/address.js';
import { formatPrefix, maskValue } from '../../../impl/api/ip/prefix.js';
import { NftSyntaxError } from './errors.js';
import { PRIORITY_NAME_HOOK, PRIORITY_NAMES, type NftHook } from './model.js';

/** A closed interval of values (an address, prefix or range; a number or range). */
export interface Interval {
  readonly lo: bigint;
  readonly hi: bigint;
}

function familyWord(f: Family): string {
  return f === 4 ? 'IPv4' : 'IPv6';
}

function addr(text: string, family: Family): bigint {
  const a = tryParseIp(text);
  if (!a)
    throw new NftSyntaxError(
      `Could not resolve hostname: "${text}" is not an ${familyWord(family)} address (the model takes addresses, not names)`,
    );
  if (a.family !== family)
    throw new NftSyntaxError(
      `datatype mismatch, expected ${familyWord(family)} address, expression has type ${familyWord(a.family)} address ("${text}")`,
    );
  return a.value;
}

/** `A`, `A/LEN` or `A-B` of one family; the text is canonical (a full-length prefix is the bare address). */
export function parseAddrValue(text: string, family: Family): Interval & { readonly text: string } {
  const bits = family === 4 ? 32 : 128;
  const slash = text.indexOf('/');
  if (slash >= 0) {
    const base = addr(text.slice(0, slash), family);
    const lenText = text.slice(slash + 1);
    if (!/^(0|[1-9][0-9]{0,2})$/.test(lenText) || Number(lenText) > bits)
      throw new NftSyntaxError(`prefix length "${lenText}" of ${text} is not 0..${bits}`);
    const len = Number(lenText);
    const lo = maskValue(base, family, len);
    const hi = lo | ((1n << BigInt(bits - len)) - 1n);
    const p = { addr: { family, value: lo }, len };
    return { lo, hi, text: len === bits ? formatIp(p.addr) : formatPrefix(p) };
  }
  // A range: IPv6 addresses hold no '-', so the first '-' splits.
  const dash = text.indexOf('-');
  if (dash > 0) {
    const lo = addr(text.slice(0, dash), family);
    const hi = addr(text.slice(dash + 1), family);
    if (hi < lo) throw new NftSyntaxError(`Range has zero or negative size: ${text}`);
    return { lo, hi, text: `${formatIp({ family, value: lo })}-${formatIp({ family, value: hi })}` };
  }
  const v = addr(text, family);
  return { lo: v, hi: v, text: formatIp({ family, value: v }) };
}

/** A number: decimal or 0x hex. */
export function parseNumber(text: string, max: number, what: string): number {
  let v: number;
  if (/^0[xX][0-9a-fA-F]{1,8}$/.test(text)) v = parseInt(text.slice(2), 16);
  else if (/^(0|[1-9][0-9]{0,9})$/.test(text)) v = Number(text);
  else
    throw new NftSyntaxError(`${what}: "${text}" is not a number (write decimal or 0x hex; names are not supported)`);
  if (v > max) throw new NftSyntaxError(`${what} out of range: ${text} (at most ${max})`);
  return v;
}

/** `N` or `A-B`. `what` is nft's word for the type ("Service" for ports: "Service out of range"). */
export function parseNumberValue(
  text: string,
  max: number,
  what: string,
): { readonly lo: number; readonly hi: number; readonly text: string } {
  const dash = text.indexOf('-', 1);
  if (dash > 0) {
    const lo = parseNumber(text.slice(0, dash), max, what);
    const hi = parseNumber(text.slice(dash + 1), max, what);
    if (hi < lo) throw new NftSyntaxError(`Range has zero or negative size: ${text}`);
    return { lo, hi, text: `${lo}-${hi}` };
  }
  const v = parseNumber(text, max, what);
  return { lo: v, hi: v, text: String(v) };
}

export function hex32(v: number): string {
  return `0x${(v >>> 0).toString(16).padStart(8, '0')}`;
}

/** The priority names usable at `hook`. */
function namesAt(hook: NftHook): string[] {
  return Object.keys(PRIORITY_NAMES).filter((n) => (PRIORITY_NAME_HOOK[n] ?? hook) === hook);
}

/**
 * A chain priority from its words: `-100`, `mangle`, `mangle - 5`, `dstnat + 10`. nft accepts
 * arithmetic only on a standard name, and dstnat/srcnat only at their hooks.
 */
export function parsePriority(words: readonly string[], hook: NftHook): number {
  const [first, op, off, ...rest] = words;
  if (first === undefined)
    throw new NftSyntaxError('priority needs a value (a number or raw, mangle, dstnat, filter, security, srcnat)');
  const named = PRIORITY_NAMES[first];
  if (named !== undefined && !namesAt(hook).includes(first))
    throw new NftSyntaxError(
      `invalid priority expression value in this context: ${first} is for hook ${PRIORITY_NAME_HOOK[first]} (at ${hook}: a number or ${namesAt(hook).join(', ')})`,
    );
  let base: number;
  if (named !== undefined) base = named;
  else if (/^-?(0|[1-9][0-9]{0,9})$/.test(first)) base = Number(first);
  else
    throw new NftSyntaxError(
      `priority "${first}" is not a number or a standard priority name (${Object.keys(PRIORITY_NAMES).join(', ')})`,
    );
  if (op === undefined) return base;
  if (
    named === undefined ||
    (op !== '+' && op !== '-') ||
    off === undefined ||
    rest.length > 0 ||
    !/^(0|[1-9][0-9]{0,5})$/.test(off)
  )
    throw new NftSyntaxError(`priority "${words.join(' ')}": arithmetic is written NAME + N or NAME - N`);
  return op === '+' ? base + Number(off) : base - Number(off);
}

/** A priority as nft lists it: a standard name of the hook, `name ± N` within 10 of one, else the number. */
export function formatPriority(p: number, hook: NftHook): string {
  let best: [string, number] | undefined;
  for (const name of namesAt(hook)) {
    const v = PRIORITY_NAMES[name]!;
    const d = p - v;
    if (Math.abs(d) <= 10 && (best === undefined || Math.abs(d) < Math.abs(best[1]))) best = [name, d];
  }
  if (!best) return String(p);
  const [name, d] = best;
  return d === 0 ? name : `${name} ${d > 0 ? '+' : '-'} ${Math.abs(d)}`;
}
