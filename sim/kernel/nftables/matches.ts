/**
 * Relational matches: `SELECTOR [& MASK | and MASK] [== | !=] VALUE`, where VALUE is one value,
 * a range `a-b`, a prefix, an anonymous set `{ a, b-c, 10.0.0.0/8 }` or a named set `@S`; for
 * the bitmask types (tcp flags, ct state) also `a,b` and `a|b`. Implicit operator: equality,
 * except for a bitmask without a mask, which nft reads as "any of these bits" (checked on the
 * kernel with `nft -d netlink`: `tcp flags syn` is `flags & 0x02 != 0`).
 */
import { NftSyntaxError } from './errors.js';
import type { Cursor } from './cursor.js';
import type { NftEvalContext, NftTableState } from './model.js';
import type { RuleBuild } from './rule-build.js';
import {
  CT_DIRECTIONS,
  CT_STATE_BITS,
  FIB_TYPES,
  L4PROTO_NUMBERS,
  NFPROTO_NUMBERS,
  TCP_FLAG_BITS,
  type Selector,
  type ValueKind,
} from './selectors.js';
import { setTypeName, type NftSetType } from './sets.js';
import { hex32, parseAddrValue, parseNumber, parseNumberValue, type Interval } from './values.js';

const SYMBOLS: Partial<Record<ValueKind, Readonly<Record<string, number>>>> = {
  l4proto: L4PROTO_NUMBERS,
  nfproto: NFPROTO_NUMBERS,
  ctstate: CT_STATE_BITS,
  ctdir: CT_DIRECTIONS,
  tcpflags: TCP_FLAG_BITS,
  fibtype: FIB_TYPES,
};

const BITMASK = new Set<ValueKind>(['ctstate', 'tcpflags']);
const MASKABLE = new Set<ValueKind>(['u32', 'ctstate', 'tcpflags']);

const SET_TYPE_OF: Partial<Record<ValueKind, NftSetType>> = {
  addr4: 'ipv4_addr',
  addr6: 'ipv6_addr',
  port: 'inet_service',
  u32: 'mark',
};

/** One value (or range/prefix) of a selector's type, with its canonical text. */
function parseValue(sel: Selector, text: string): Interval & { readonly text: string } {
  switch (sel.kind) {
    case 'addr4':
    case 'addr6':
      return parseAddrValue(text, sel.kind === 'addr4' ? 4 : 6);
    case 'port': {
      const v = parseNumberValue(text, 0xffff, 'Service');
      return { lo: BigInt(v.lo), hi: BigInt(v.hi), text: v.text };
    }
    case 'u32': {
      const v = parseNumberValue(text, 0xffffffff, sel.name);
      const canon = sel.name.endsWith('mark')
        ? v.lo === v.hi
          ? hex32(v.lo)
          : `${hex32(v.lo)}-${hex32(v.hi)}`
        : v.text;
      return { lo: BigInt(v.lo), hi: BigInt(v.hi), text: canon };
    }
    case 'u16': {
      const v = parseNumberValue(text, 0xffff, sel.name);
      return { lo: BigInt(v.lo), hi: BigInt(v.hi), text: v.text };
    }
    default: {
      const table = SYMBOLS[sel.kind];
      if (!table) throw new NftSyntaxError(`${sel.name}: no values of this kind`);
      const sym = table[text];
      if (sym !== undefined) return { lo: BigInt(sym), hi: BigInt(sym), text };
      if (BITMASK.has(sel.kind) && /^(0x[0-9a-fA-F]+|[0-9]+)$/.test(text)) {
        // a bitmask compared with a number: `ct state & (new | established) == 0`
        const n = parseNumber(text, 0xffffffff, sel.name);
        return { lo: BigInt(n), hi: BigInt(n), text: sel.kind === 'ctstate' ? String(n) : `0x${n.toString(16)}` };
      }
      if (sel.kind === 'l4proto' && /^[0-9]+$/.test(text)) {
        const n = parseNumber(text, 255, 'meta l4proto');
        return { lo: BigInt(n), hi: BigInt(n), text: String(n) };
      }
      throw new NftSyntaxError(`${sel.name}: "${text}" is not one of ${Object.keys(table).join(', ')}`);
    }
  }
}

/** Bitmask values joined by `|` or `,` (and wrapped in parentheses): their OR. */
function parseFlags(sel: Selector, cur: Cursor): { readonly bits: bigint; readonly text: string } {
  const paren = cur.eat('(');
  let bits = 0n;
  const words: string[] = [];
  for (;;) {
    const w = cur.word(`a ${sel.name} value`);
    bits |= parseValue(sel, w).lo;
    words.push(w);
    if (cur.eat('|') || (!paren && cur.peek() === ',' && cur.eat(','))) continue;
    break;
  }
  if (paren) cur.expect(')', `to close ${sel.name} value`);
  return { bits, text: words.length === 1 ? words[0]! : `${paren ? '(' : ''}${words.join(' | ')}${paren ? ')' : ''}` };
}

function parseMask(sel: Selector, cur: Cursor): { readonly mask: bigint; readonly text: string } {
  if (BITMASK.has(sel.kind)) {
    const f = parseFlags(sel, cur);
    return { mask: f.bits, text: f.text };
  }
  const w = cur.word(`a mask after ${sel.name} &`);
  const m = parseNumber(w, 0xffffffff, `${sel.name} mask`);
  return { mask: BigInt(m), text: hex32(m) };
}

type Rhs =
  | { readonly k: 'values'; readonly items: readonly Interval[]; readonly text: string; readonly braces: boolean }
  | { readonly k: 'set'; readonly name: string }
  | { readonly k: 'string'; readonly items: readonly string[]; readonly text: string };

function ifnameText(s: string): string {
  return `"${s}"`;
}

function parseRhs(sel: Selector, cur: Cursor, b: RuleBuild): Rhs {
  const t = cur.peekToken();
  if (t === undefined) throw new NftSyntaxError(`unexpected end of rule, expecting a value for ${sel.name}`);
  if (!t.quoted && t.text.startsWith('@')) {
    cur.next('set');
    const name = t.text.slice(1);
    const set = b.table.sets.get(name);
    if (!set)
      throw new NftSyntaxError(
        `Set "${name}" does not exist in table ${b.table.family} ${b.table.name} (declare it with add set before the rule)`,
        t.line,
      );
    const want = SET_TYPE_OF[sel.kind];
    if (want === undefined)
      throw new NftSyntaxError(`${sel.name}: named sets are not supported for this expression`, t.line);
    if (set.type !== want)
      throw new NftSyntaxError(
        `datatype mismatch, expected ${setTypeName(set.type)}, expression has type ${setTypeName(want)} (${sel.name} @${name})`,
        t.line,
      );
    return { k: 'set', name };
  }
  if (sel.kind === 'ifname') {
    const items: string[] = [];
    if (cur.eat('{')) {
      for (;;) {
        items.push(cur.word('an interface name'));
        if (cur.eat(',')) continue;
        cur.expect('}', 'to close the set');
        break;
      }
      return { k: 'string', items, text: `{ ${items.map(ifnameText).join(', ')} }` };
    }
    const w = cur.word('an interface name');
    if (w.length === 0 || w.length > 16)
      throw new NftSyntaxError(`${sel.name}: "${w}" is not an interface name (1-15 characters)`);
    return { k: 'string', items: [w], text: ifnameText(w) };
  }
  if (cur.eat('{')) {
    const items: Interval[] = [];
    const texts: string[] = [];
    for (;;) {
      while (cur.eat('\n'));
      const w = cur.word(`a ${sel.name} value`);
      if (w === '}' && items.length > 0) break;
      const v = parseValue(sel, w);
      items.push(v);
      texts.push(v.text);
      while (cur.eat('\n'));
      if (cur.eat(',')) continue;
      cur.expect('}', 'to close the anonymous set');
      break;
    }
    // a set has no order: listed by value, as nft lists it
    const sorted = items
      .map((v, i) => ({ v, t: texts[i]! }))
      .sort((a, b) => (a.v.lo < b.v.lo ? -1 : a.v.lo > b.v.lo ? 1 : 0));
    return { k: 'values', items, text: `{ ${sorted.map((x) => x.t).join(', ')} }`, braces: true };
  }
  if (BITMASK.has(sel.kind)) {
    const f = parseFlags(sel, cur);
    return { k: 'values', items: [{ lo: f.bits, hi: f.bits }], text: f.text, braces: false };
  }
  const w = cur.next(`a ${sel.name} value`);
  const v = parseValue(sel, w.text);
  return { k: 'values', items: [v], text: v.text, braces: false };
}

/** Bit names in ascending bit order, comma-joined as nft lists them. */
function flagNames(sel: Selector, bits: bigint): string {
  const table = SYMBOLS[sel.kind]!;
  const names = Object.entries(table)
    .filter(([, v]) => v !== 0 && (BigInt(v) & bits) === BigInt(v))
    .sort((a, b) => a[1] - b[1])
    .map(([n]) => n);
  const known = names.reduce((acc, n) => acc | BigInt(table[n]!), 0n);
  return known === bits && names.length > 0 ? names.join(',') : `0x${bits.toString(16)}`;
}

/**
 * A bitmask match in nft's listing words, so each meaning has one text whatever the spelling:
 * `syn,ack` (any of the bits), `== syn`, `! a,b` (none of the bits), `syn / syn,ack` (the bits of
 * the mask are these).
 */
function bitmaskText(sel: Selector, mask: bigint | undefined, op: '==' | '!=' | undefined, v: bigint): string {
  if (mask === undefined)
    return op === undefined ? flagNames(sel, v) : `${op} ${flagNames(sel, v).replaceAll(',', '|')}`;
  if (op !== '!=' && v === 0n) return `! ${flagNames(sel, mask)}`;
  if (op !== '!=') return `${flagNames(sel, v)} / ${flagNames(sel, mask)}`;
  return `& (${flagNames(sel, mask).replaceAll(',', ' | ')}) != ${flagNames(sel, v).replaceAll(',', '|')}`;
}

function inIntervals(items: readonly Interval[], v: bigint): boolean {
  for (const i of items) if (v >= i.lo && v <= i.hi) return true;
  return false;
}

/**
 * Parse `SELECTOR ...` (the selector's words already read) and add its match to the rule.
 * Returns nothing; the match's canonical text goes to the listing.
 */
export function parseMatch(sel: Selector, cur: Cursor, b: RuleBuild): void {
  let mask: { readonly mask: bigint; readonly text: string } | undefined;
  let op: '==' | '!=' | undefined;
  let rhs: Rhs;
  const bitmask = BITMASK.has(sel.kind);
  if (bitmask && cur.peek() === '!') {
    // nft's listing form of "none of these bits": `ct state ! established,new` (= `& (...) == 0`)
    cur.next('!');
    const f = parseFlags(sel, cur);
    mask = { mask: f.bits, text: f.text };
    op = '==';
    rhs = { k: 'values', items: [{ lo: 0n, hi: 0n }], text: '0', braces: false };
  } else {
    if (cur.peek() === '&' || cur.peek() === 'and') {
      cur.next('&');
      if (!MASKABLE.has(sel.kind))
        throw new NftSyntaxError(`${sel.name}: a mask (& MASK) is supported on marks, ct state and tcp flags`);
      mask = parseMask(sel, cur);
    }
    if (cur.eat('==') || cur.eat('eq')) op = '==';
    else if (cur.eat('!=') || cur.eat('ne')) op = '!=';
    rhs = parseRhs(sel, cur, b);
    if (bitmask && mask === undefined && op !== '!=' && rhs.k === 'values' && !rhs.braces && cur.peek() === '/') {
      // nft's listing form of "these bits of the mask": `tcp flags syn / fin,syn,rst,ack`
      cur.next('/');
      const f = parseFlags(sel, cur);
      mask = { mask: f.bits, text: f.text };
      op = '==';
    }
  }
  if (sel.nf !== undefined) b.network(sel.nf, sel.name.split(' ')[0]!);
  if (sel.l4 !== undefined) b.transport(sel.l4);
  if (sel.kind === 'l4proto' && op !== '!=' && rhs.k === 'values' && !rhs.braces) {
    const n = Number(rhs.items[0]!.lo);
    if (n === 6) b.transport('tcp');
    else if (n === 17) b.transport('udp');
  }
  if (sel.kind === 'nfproto' && op !== '!=' && rhs.k === 'values' && !rhs.braces)
    b.network(rhs.items[0]!.lo === 2n ? 4 : 6, 'meta nfproto');
  if (sel.ct) b.needsConntrack = true;
  const neg = op === '!=';
  const opText = neg ? '!= ' : op === '==' && mask ? '== ' : '';
  b.listing.push(
    bitmask && rhs.k === 'values' && !rhs.braces
      ? `${sel.name} ${bitmaskText(sel, mask?.mask, op, rhs.items[0]!.lo)}`
      : `${sel.name}${mask ? ` & ${mask.text}` : ''} ${opText}${rhs.k === 'set' ? `@${rhs.name}` : rhs.text}`,
  );

  if (rhs.k === 'string') {
    const get = sel.getString!;
    const names = rhs.items;
    // nft ifname wildcards: a trailing `*` matches a prefix.
    const tests = names.map((n) =>
      n.endsWith('*') ? (s: string) => s.startsWith(n.slice(0, -1)) : (s: string) => s === n,
    );
    b.ops.push({
      k: 'match',
      pred: (ctx) => {
        const s = get(ctx);
        let hit = false;
        for (const t of tests) if (t(s)) hit = true;
        return hit !== neg;
      },
    });
    return;
  }
  const get = sel.get!;
  const m = mask?.mask;
  if (rhs.k === 'set') {
    const name = rhs.name;
    b.ops.push({
      k: 'match',
      pred: (ctx: NftEvalContext, t: NftTableState) => {
        let v = get(ctx);
        if (v === undefined) return false;
        if (m !== undefined) v &= m;
        const set = t.sets.get(name);
        // the kernel refuses to delete a set a rule uses; a missing one matches nothing
        return set !== undefined && set.has(v) !== neg;
      },
    });
    return;
  }
  const items = rhs.items;
  if (BITMASK.has(sel.kind) && op === undefined && m === undefined && !rhs.braces) {
    const bits = items[0]!.lo;
    b.ops.push({
      k: 'match',
      pred: (ctx) => {
        const v = get(ctx);
        return v !== undefined && (v & bits) !== 0n;
      },
    });
    return;
  }
  if (items.length === 1 && items[0]!.lo === items[0]!.hi) {
    const want = items[0]!.lo;
    b.ops.push({
      k: 'match',
      pred: (ctx) => {
        let v = get(ctx);
        if (v === undefined) return false;
        if (m !== undefined) v &= m;
        return (v === want) !== neg;
      },
    });
    return;
  }
  b.ops.push({
    k: 'match',
    pred: (ctx) => {
      let v = get(ctx);
      if (v === undefined) return false;
      if (m !== undefined) v &= m;
      return inIntervals(items, v) !== neg;
    },
  });
}
