/**
 * Statements and verdicts: counter, log, `meta mark set`, `ct mark set`, `ct zone set`, notrack,
 * tproxy, the NAT statements (redirect, dnat, snat, masquerade), reject, and accept / drop /
 * return / continue / jump / goto. Each records the chain types and hooks the kernel allows it at
 * (nft_*_validate), checked at commit through every base chain that reaches the rule.
 */
import { formatIp, tryParseIp, type IpAddress } from '../../../impl/api/ip/address.js';
import { CtTemplate } from '../ct-template.js';
import type { NatAction } from '../netfilter/types.js';
import { NftSyntaxError } from './errors.js';
import type { Cursor } from './cursor.js';
import type { NftEvalContext } from './model.js';
import type { RuleBuild } from './rule-build.js';
import { hex32, parseNumber, parseNumberValue } from './values.js';

/** A mark value source: a constant, `ct mark` or `meta mark`, then `& | ^` with constants, left to right. */
interface MarkExpr {
  readonly text: string;
  readonly usesCt: boolean;
  eval(ctx: NftEvalContext): number | undefined;
}

function parseMarkExpr(cur: Cursor, what: string): MarkExpr {
  let src: (ctx: NftEvalContext) => number | undefined;
  let text: string;
  let usesCt = false;
  const w = cur.word(`a value for ${what}`);
  if (w === 'ct') {
    cur.expect('mark', `after "ct" in ${what} (the model reads ct mark only)`);
    src = (ctx) => (ctx.ct ? ctx.ct.mark >>> 0 : undefined);
    text = 'ct mark';
    usesCt = true;
  } else if (w === 'meta' || w === 'mark') {
    if (w === 'meta') cur.expect('mark', `after "meta" in ${what} (the model reads meta mark only)`);
    src = (ctx) => ctx.packet.mark >>> 0;
    text = 'meta mark';
  } else {
    const v = parseNumber(w, 0xffffffff, what);
    src = () => v;
    text = hex32(v);
  }
  // `& | ^` with constants, left to right, fold into one (x & mask) ^ xor, as nft's bitwise
  // expression holds them; printed as nft prints that pair, so the listing does not depend on
  // how it was written (`ct mark & 0xfffff000 | 0x111` lists as `& 0xfffff111 | 0x00000111`).
  let mask = 0xffffffff;
  let xor = 0;
  for (;;) {
    const p = cur.peek();
    const op =
      p === '&' || p === 'and' ? '&' : p === '|' || p === 'or' ? '|' : p === '^' || p === 'xor' ? '^' : undefined;
    if (op === undefined) break;
    cur.next(op);
    const v = parseNumber(cur.word(`a number after ${op}`), 0xffffffff, `${what} ${op}`);
    if (op === '&') {
      mask = (mask & v) >>> 0;
      xor = (xor & v) >>> 0;
    } else if (op === '|') {
      mask = (mask & ~v) >>> 0;
      xor = (xor | v) >>> 0;
    } else xor = (xor ^ v) >>> 0;
  }
  if ((xor & mask) === 0) {
    const shown = (mask | xor) >>> 0;
    if (shown !== 0xffffffff) text += ` & ${hex32(shown)}`;
    if (xor !== 0) text += ` | ${hex32(xor)}`;
  } else {
    if (mask !== 0xffffffff) text += ` & ${hex32(mask)}`;
    text += ` ^ ${hex32(xor)}`;
  }
  const m = mask;
  const x = xor;
  return {
    text,
    usesCt,
    eval: (ctx) => {
      const v = src(ctx);
      return v === undefined ? undefined : ((v & m) ^ x) >>> 0;
    },
  };
}

/** `[ADDR][:PORT[-PORT]]` with `[v6]:port`; family decides how a bare v6 address reads. */
function parseNatTarget(
  text: string,
  what: string,
): { readonly addr: IpAddress | undefined; readonly ports: readonly [number, number] | undefined } {
  let addrText: string | undefined;
  let portText: string | undefined;
  if (text.startsWith('[')) {
    const end = text.indexOf(']');
    if (end < 0) throw new NftSyntaxError(`${what}: "${text}": unterminated [ ]`);
    addrText = text.slice(1, end);
    const rest = text.slice(end + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) throw new NftSyntaxError(`${what}: "${text}": expected :PORT after ]`);
      portText = rest.slice(1);
    }
  } else if (text.startsWith(':')) portText = text.slice(1);
  else if ((text.match(/:/g) ?? []).length === 1) {
    const i = text.indexOf(':');
    addrText = text.slice(0, i);
    portText = text.slice(i + 1);
  } else addrText = text;
  let addr: IpAddress | undefined;
  if (addrText !== undefined && addrText !== '') {
    addr = tryParseIp(addrText);
    if (!addr)
      throw new NftSyntaxError(`${what}: "${addrText}" is not an address (write A, A:PORT, [A6]:PORT or :PORT)`);
  }
  let ports: readonly [number, number] | undefined;
  if (portText !== undefined) {
    const r = parseNumberValue(portText, 0xffff, 'Service');
    ports = [r.lo, r.hi];
  }
  return { addr, ports };
}

function natPortsText(p: readonly [number, number] | undefined): string {
  return p === undefined ? '' : p[0] === p[1] ? `:${p[0]}` : `:${p[0]}-${p[1]}`;
}

function formatNatAddr(a: IpAddress, withPort: boolean): string {
  return a.family === 6 && withPort ? `[${formatIp(a)}]` : formatIp(a);
}

const NAT_HOOKS = {
  dnat: ['prerouting', 'output'],
  redirect: ['prerouting', 'output'],
  snat: ['postrouting', 'input'],
  masquerade: ['postrouting'],
} as const;

function natStatement(word: 'dnat' | 'snat' | 'redirect' | 'masquerade', cur: Cursor, b: RuleBuild): void {
  let fam: 4 | 6 | undefined;
  let famWord = '';
  if (word === 'dnat' || word === 'snat') {
    if (cur.eat('ip')) fam = 4;
    else if (cur.eat('ip6')) fam = 6;
    if (fam !== undefined) {
      famWord = fam === 4 ? ' ip' : ' ip6';
      b.network(fam, fam === 4 ? 'ip' : 'ip6');
    }
  }
  let target: ReturnType<typeof parseNatTarget> = { addr: undefined, ports: undefined };
  if (cur.eat('to')) target = parseNatTarget(cur.word(`an address or :port after ${word} to`), word);
  else if (word === 'dnat' || word === 'snat') throw new NftSyntaxError(`${word} needs "to ADDRESS[:PORT]"`);
  if ((word === 'redirect' || word === 'masquerade') && target.addr)
    throw new NftSyntaxError(`${word} takes a port only ("${word} to :PORT")`);
  if ((word === 'dnat' || word === 'snat') && !target.addr)
    throw new NftSyntaxError(`${word} needs an address ("${word} to ADDRESS[:PORT]")`);
  if (target.addr) {
    if (b.nf === undefined && fam === undefined)
      throw new NftSyntaxError('ip or ip6 must be specified with address for inet tables.');
    const f = fam ?? b.nf!;
    if (target.addr.family !== f)
      throw new NftSyntaxError(
        `datatype mismatch: ${word} to an IPv${target.addr.family} address in an IPv${f} context`,
      );
    fam = f;
    if (b.table.family === 'inet' && famWord === '') famWord = f === 4 ? ' ip' : ' ip6';
  }
  if (target.ports && b.l4 === undefined)
    throw new NftSyntaxError('transport protocol mapping is only valid after transport protocol match');
  b.constraints.push({ type: 'nat', hooks: NAT_HOOKS[word], what: word });
  b.needsConntrack = true;
  const ports = target.ports;
  let action: NatAction;
  if (word === 'redirect') action = ports ? { kind: 'redirect', ports } : { kind: 'redirect' };
  else if (word === 'masquerade') action = ports ? { kind: 'masquerade', ports } : { kind: 'masquerade' };
  else if (word === 'dnat')
    action = ports ? { kind: 'dnat', addr: target.addr!, ports } : { kind: 'dnat', addr: target.addr! };
  else action = ports ? { kind: 'snat', addr: target.addr!, ports } : { kind: 'snat', addr: target.addr! };
  const to = target.addr
    ? ` to ${formatNatAddr(target.addr, ports !== undefined)}${natPortsText(ports)}`
    : ports
      ? ` to ${natPortsText(ports)}`
      : '';
  const text = `${word}${famWord}${to}`;
  // the family the statement applies to: in an inet table `dnat ip to` carries `meta nfproto ipv4`
  const only = target.addr ? fam : undefined;
  if (only !== undefined && b.table.family === 'inet')
    b.ops.push({ k: 'match', pred: (ctx) => ctx.packet.family === only });
  b.verdict = { k: 'nat', action, family: only };
  b.terminal = word;
  b.effect = text;
  b.listing.push(text);
}

function tproxyStatement(cur: Cursor, b: RuleBuild): void {
  let fam: 4 | 6 | undefined;
  if (cur.eat('ip')) fam = 4;
  else if (cur.eat('ip6')) fam = 6;
  if (fam !== undefined) b.network(fam, fam === 4 ? 'ip' : 'ip6');
  cur.expect('to', 'after tproxy');
  const target = parseNatTarget(cur.word('an address or :port after tproxy to'), 'tproxy');
  if (b.l4 === undefined) throw new NftSyntaxError('Transparent proxy support requires transport protocol match');
  if (target.addr && b.nf === undefined && fam === undefined)
    throw new NftSyntaxError('ip or ip6 must be specified with address for inet tables.');
  if (target.ports && target.ports[0] !== target.ports[1])
    throw new NftSyntaxError('tproxy takes one port, not a range');
  if (target.addr && target.addr.family !== (fam ?? b.nf))
    throw new NftSyntaxError(
      `datatype mismatch: tproxy to an IPv${target.addr.family} address in an IPv${fam ?? b.nf} context`,
    );
  b.constraints.push({ hooks: ['prerouting'], what: 'tproxy' });
  const only = fam;
  const addr = target.addr;
  const port = target.ports?.[0];
  const famWord = fam === 4 ? ' ip' : fam === 6 ? ' ip6' : '';
  const text = `tproxy${famWord} to ${addr ? formatNatAddr(addr, port !== undefined) : ''}${port !== undefined ? `:${port}` : ''}`;
  b.listing.push(text);
  b.effect = text;
  b.ops.push({
    k: 'stmt',
    apply: (ctx) => {
      if (only !== undefined && ctx.packet.family !== only) return false;
      return ctx.tproxyAssign(addr, port ?? ctx.packet.dport);
    },
  });
}

function rejectStatement(cur: Cursor, b: RuleBuild): void {
  let withText: string | undefined;
  let text = 'reject';
  if (cur.eat('with')) {
    const kind = cur.word('tcp, icmp, icmpv6 or icmpx after reject with');
    if (kind === 'tcp') {
      cur.expect('reset', 'after reject with tcp');
      if (b.l4 !== 'tcp')
        throw new NftSyntaxError('reject with tcp reset needs a tcp match before it (meta l4proto tcp)');
      withText = 'tcp-reset';
      text = 'reject with tcp reset';
    } else if (kind === 'icmp' || kind === 'icmpv6' || kind === 'icmpx') {
      cur.eat('type');
      const type = cur.word(`an ${kind} type`);
      if (!/^[a-z-]+$/.test(type)) throw new NftSyntaxError(`reject with ${kind}: "${type}" is not a type name`);
      withText = `${kind === 'icmpv6' ? 'icmp6' : 'icmp'}-${type}`;
      text = `reject with ${kind} ${type}`;
    } else
      throw new NftSyntaxError(`reject with "${kind}": supported are tcp reset, icmp TYPE, icmpv6 TYPE, icmpx TYPE`);
  }
  b.constraints.push({ hooks: ['prerouting', 'input', 'forward', 'output'], what: 'reject' });
  const fixed = withText;
  b.verdict = { k: 'reject', with: fixed ?? '' };
  b.terminal = 'reject';
  b.effect = text;
  b.listing.push(text);
}

/** Words that start a statement (the parser tries matches first for meta/ct/mark). */
export const STATEMENT_WORDS = [
  'counter',
  'log',
  'meta mark set',
  'ct mark set',
  'ct zone set',
  'notrack',
  'tproxy',
  'redirect',
  'dnat',
  'snat',
  'masquerade',
  'reject',
  'accept',
  'drop',
  'return',
  'continue',
  'jump',
  'goto',
  'comment',
];

/**
 * Parse the statement starting with `word` (already read). Returns false when `word` starts no
 * statement the model supports.
 */
export function parseStatement(word: string, cur: Cursor, b: RuleBuild): boolean {
  switch (word) {
    case 'counter': {
      b.beforeStatement(word);
      // a listing's counter values are read and forgotten (the model keeps no counters)
      if (cur.eat('packets')) {
        parseNumber(cur.word('a number after packets'), Number.MAX_SAFE_INTEGER, 'counter packets');
        cur.expect('bytes', 'after counter packets N');
        parseNumber(cur.word('a number after bytes'), Number.MAX_SAFE_INTEGER, 'counter bytes');
      }
      b.listing.push('counter');
      return true;
    }
    case 'log': {
      b.beforeStatement(word);
      let prefix = '';
      let text = 'log';
      for (;;) {
        if (cur.eat('prefix')) {
          const t = cur.next('a quoted prefix');
          prefix = t.text;
          text += ` prefix "${prefix}"`;
        } else if (cur.eat('level')) {
          const l = cur.word('a log level');
          if (!['emerg', 'alert', 'crit', 'err', 'warn', 'notice', 'info', 'debug', 'audit'].includes(l))
            throw new NftSyntaxError(
              `log level "${l}": use emerg, alert, crit, err, warn, notice, info, debug or audit`,
            );
          text += ` level ${l}`;
        } else break;
      }
      b.listing.push(text);
      b.effect = text;
      b.ops.push({
        k: 'stmt',
        apply: (ctx) => {
          ctx.log(prefix);
          return true;
        },
      });
      return true;
    }
    case 'notrack':
      b.beforeStatement(word);
      b.listing.push('notrack');
      b.effect = 'notrack';
      b.ops.push({
        k: 'stmt',
        apply: (ctx) => {
          ctx.setNotrack();
          return true;
        },
      });
      return true;
    case 'tproxy':
      b.beforeStatement(word);
      tproxyStatement(cur, b);
      return true;
    case 'redirect':
    case 'dnat':
    case 'snat':
    case 'masquerade':
      b.beforeStatement(word);
      natStatement(word, cur, b);
      return true;
    case 'reject':
      b.beforeStatement(word);
      rejectStatement(cur, b);
      return true;
    case 'accept':
    case 'drop':
    case 'return':
    case 'continue':
      b.beforeStatement(word);
      b.verdict = { k: word };
      b.terminal = word;
      b.effect = word;
      b.listing.push(word);
      return true;
    case 'jump':
    case 'goto': {
      b.beforeStatement(word);
      const target = cur.next(`a chain name after ${word}`).text;
      b.verdict = { k: word, chain: target };
      b.terminal = word;
      b.effect = `${word} ${target}`;
      b.listing.push(`${word} ${target}`);
      return true;
    }
    case 'comment': {
      const t = cur.next('a quoted comment');
      if (!t.quoted) throw new NftSyntaxError(`comment "${t.text}": a comment is a "quoted string"`, t.line);
      b.listing.push(`comment "${t.text}"`);
      return true;
    }
    default:
      return false;
  }
}

/** `meta mark set EXPR` (also `mark set`), after the words up to `set`. */
export function metaMarkSet(cur: Cursor, b: RuleBuild): void {
  b.beforeStatement('meta mark set');
  const e = parseMarkExpr(cur, 'meta mark set');
  if (e.usesCt) b.needsConntrack = true;
  const text = `meta mark set ${e.text}`;
  b.listing.push(text);
  b.effect = text;
  b.ops.push({
    k: 'stmt',
    apply: (ctx) => {
      const v = e.eval(ctx);
      if (v === undefined) return false;
      ctx.packet.mark = v;
      return true;
    },
  });
}

/**
 * `ct mark set EXPR`. nft_ct_set_eval does nothing (and does not break) without an entry or on a
 * template (`ct zone set` earlier in a raw-priority chain): unlike iptables' CONNMARK, which writes
 * the template's mark.
 */
export function ctMarkSet(cur: Cursor, b: RuleBuild): void {
  b.beforeStatement('ct mark set');
  const e = parseMarkExpr(cur, 'ct mark set');
  b.needsConntrack = true;
  const text = `ct mark set ${e.text}`;
  b.listing.push(text);
  b.effect = text;
  b.ops.push({
    k: 'stmt',
    apply: (ctx) => {
      const v = e.eval(ctx);
      if (v === undefined) return false;
      const ct = ctx.ct;
      if (ct !== undefined && !(ct instanceof CtTemplate)) ct.mark = v;
      return true;
    },
  });
}

/** `ct zone set N`: a conntrack template for the entry about to be made (as CT --zone). */
export function ctZoneSet(cur: Cursor, b: RuleBuild): void {
  b.beforeStatement('ct zone set');
  const zone = parseNumber(cur.word('a zone number'), 0xffff, 'ct zone set');
  b.needsConntrack = true;
  const text = `ct zone set ${zone}`;
  b.listing.push(text);
  b.effect = text;
  b.ops.push({
    k: 'stmt',
    apply: (ctx) => {
      ctx.setZone(zone);
      return true;
    },
  });
}
