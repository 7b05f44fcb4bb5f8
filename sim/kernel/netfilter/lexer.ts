/**
 * Shell-like word splitting as iptables-restore does it for one line: whitespace separates
 * words, double or single quotes group words (quotes removed), backslash escapes the next
 * character inside double quotes and outside quotes. An unterminated quote is an error.
 */
import { RuleSyntaxError } from './errors.js';

export function splitWords(line: string): string[] {
  const words: string[] = [];
  let cur = '';
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string;
    if (quote) {
      if (c === quote) {
        quote = undefined;
        continue;
      }
      if (c === '\\' && quote === '"' && i + 1 < line.length) {
        cur += line[++i];
        continue;
      }
      cur += c;
      continue;
    }
    if (c === ' ' || c === '\t' || c === '\r') {
      if (inWord) {
        words.push(cur);
        cur = '';
        inWord = false;
      }
      continue;
    }
    inWord = true;
    if (c === '"' || c === "'") {
      quote = c;
      continue;
    }
    if (c === '\\' && i + 1 < line.length) {
      cur += line[++i];
      continue;
    }
    cur += c;
  }
  if (quote) throw new RuleSyntaxError(`unterminated ${quote} quote`);
  if (inWord) words.push(cur);
  return words;
}

/** Quote a value the way iptables-save does: bare when it is a plain word, else "..." with \" and \\ escaped. */
export function quoteWord(s: string): string {
  if (s !== '' && /^[A-Za-z0-9_.,:/=@+%-]+$/.test(s)) return s;
  return `"${s.replace(/[\\"]/g, (m) => `\\${m}`)}"`;
}
