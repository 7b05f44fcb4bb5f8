/**
 * One rule's words → a compiled NftRule: matches and statements in the order written (the kernel
 * runs a rule's expressions in order), its verdict, its canonical listing text and the
 * constraints it puts on the base chains that reach it. Every word the model does not support is
 * an error naming it and listing what is supported.
 */
import { NftSyntaxError } from './errors.js';
import { Cursor } from './cursor.js';
import type { Token } from './lexer.js';
import { parseMatch } from './matches.js';
import type { NftRule, NftTableState } from './model.js';
import { RuleBuild } from './rule-build.js';
import {
  BARE_META,
  CT_KEYS,
  ctSelector,
  FIB_DADDR_TYPE,
  META_KEYS,
  metaSelector,
  payloadSelector,
} from './selectors.js';
import { ctMarkSet, ctZoneSet, metaMarkSet, parseStatement, STATEMENT_WORDS } from './statements.js';

const MATCH_WORDS = [
  'ip saddr|daddr',
  'ip6 saddr|daddr',
  'tcp sport|dport|flags',
  'udp sport|dport',
  'th sport|dport',
  `meta ${META_KEYS.join('|')}`,
  [...BARE_META].join(', '),
  `ct ${CT_KEYS.join('|')}`,
  'fib daddr type',
];

function unsupported(what: string): NftSyntaxError {
  return new NftSyntaxError(
    `${what} (supported matches: ${MATCH_WORDS.join('; ')}; statements: ${STATEMENT_WORDS.join(', ')})`,
  );
}

/** Words joined as written, one space apart; strings quoted again. */
function ruleText(tokens: readonly Token[]): string {
  return tokens
    .map((t) => (t.quoted ? `"${t.text}"` : t.text))
    .join(' ')
    .replace(/ ,/g, ',');
}

export function parseRule(
  tokens: readonly Token[],
  table: NftTableState,
  where: { readonly line: number; readonly source: string },
): NftRule {
  const cur = new Cursor(tokens, where.line);
  const b = new RuleBuild(table);
  if (tokens.length === 0) throw new NftSyntaxError('empty rule: a rule needs at least one statement');
  while (!cur.atEnd) {
    const t = cur.next('a statement');
    const w = t.text;
    if (t.quoted)
      throw new NftSyntaxError(
        `unexpected string "${w}" (strings go after comment, log prefix or iifname/oifname)`,
        t.line,
      );
    try {
      if (w === 'ip' || w === 'ip6' || w === 'tcp' || w === 'udp' || w === 'th') {
        const field = cur.word(`a field after ${w}`);
        const sel = payloadSelector(w, field);
        if (!sel) throw unsupported(`"${w} ${field}" is not supported`);
        b.beforeStatement(`${w} ${field}`);
        parseMatch(sel, cur, b);
        continue;
      }
      if (w === 'meta' || BARE_META.has(w)) {
        const key = w === 'meta' ? cur.word('a meta key') : w;
        if (key === 'mark' && cur.eat('set')) {
          metaMarkSet(cur, b);
          continue;
        }
        const sel = metaSelector(key);
        if (!sel) throw unsupported(`"meta ${key}" is not supported`);
        b.beforeStatement(`meta ${key}`);
        parseMatch(sel, cur, b);
        continue;
      }
      if (w === 'ct') {
        const key = cur.word('a ct key');
        if (key === 'mark' && cur.eat('set')) {
          ctMarkSet(cur, b);
          continue;
        }
        if (key === 'zone' && cur.eat('set')) {
          ctZoneSet(cur, b);
          continue;
        }
        const sel = ctSelector(key);
        if (!sel) throw unsupported(`"ct ${key}" is not supported`);
        b.beforeStatement(`ct ${key}`);
        parseMatch(sel, cur, b);
        continue;
      }
      if (w === 'fib') {
        cur.expect('daddr', 'after fib (the model supports fib daddr type)');
        cur.expect('type', 'after fib daddr (the model supports fib daddr type)');
        b.beforeStatement('fib');
        parseMatch(FIB_DADDR_TYPE, cur, b);
        continue;
      }
      if (parseStatement(w, cur, b)) continue;
      throw unsupported(`"${w}" is not supported here`);
    } catch (e) {
      if (e instanceof NftSyntaxError && e.line === undefined) throw new NftSyntaxError(e.message, t.line);
      throw e;
    }
  }
  const effect = b.effect ?? (b.verdict ? b.listing[b.listing.length - 1]! : 'continue');
  return {
    ops: b.ops,
    verdict: b.verdict,
    text: ruleText(tokens),
    listing: b.listing.join(' '),
    effect,
    line: where.line,
    source: where.source,
    needsConntrack: b.needsConntrack,
    constraints: b.constraints,
  };
}
