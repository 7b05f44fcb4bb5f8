/**
 * Splits an `nft -f` document into tokens, each with its 1-based line. nft's own scanner is a
 * flex grammar; the model needs far less: words (anything up to whitespace or punctuation, so
 * `127.0.0.1/32`, `::1/128`, `[::]:15001`, `:15006`, `0xfff`, `!=` and `@set` stay whole),
 * double-quoted strings (quotes removed, `quoted` set), the punctuation `{ } ( ) ; , | &` as
 * tokens of their own, and a newline token (statements and commands end at a newline or `;`).
 * `#` starts a comment to the end of the line, outside strings.
 */
import { NftSyntaxError } from './errors.js';

export interface Token {
  /** The word, the string's content, a punctuation character, or '\n'. */
  readonly text: string;
  readonly line: number;
  /** A "double-quoted" string: never a keyword. */
  readonly quoted: boolean;
}

const PUNCT = new Set(['{', '}', '(', ')', ';', ',', '|', '&']);

export function tokenize(text: string): Token[] {
  const out: Token[] = [];
  let line = 1;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i] as string;
    if (c === '\n') {
      out.push({ text: '\n', line, quoted: false });
      line++;
      i++;
      continue;
    }
    if (c === ' ' || c === '\t' || c === '\r') {
      i++;
      continue;
    }
    if (c === '\\' && text[i + 1] === '\n') {
      // a backslash-newline continues the line (nft's scanner joins them)
      line++;
      i += 2;
      continue;
    }
    if (c === '#') {
      while (i < n && text[i] !== '\n') i++;
      continue;
    }
    if (c === '"') {
      const start = line;
      let s = '';
      i++;
      while (i < n && text[i] !== '"') {
        if (text[i] === '\n') throw new NftSyntaxError('unterminated " string (a string ends on its line)', start);
        s += text[i];
        i++;
      }
      if (i >= n) throw new NftSyntaxError('unterminated " string', start);
      i++;
      out.push({ text: s, line: start, quoted: true });
      continue;
    }
    if (PUNCT.has(c)) {
      out.push({ text: c, line, quoted: false });
      i++;
      continue;
    }
    let w = '';
    while (i < n) {
      const d = text[i] as string;
      if (d === ' ' || d === '\t' || d === '\r' || d === '\n' || d === '#' || d === '"' || PUNCT.has(d)) break;
      w += d;
      i++;
    }
    out.push({ text: w, line, quoted: false });
  }
  return out;
}
