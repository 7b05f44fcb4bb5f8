/** Reads the tokens of one rule (or one command) in order, failing with what was expected. */
import { NftSyntaxError } from './errors.js';
import type { Token } from './lexer.js';

export class Cursor {
  private pos = 0;
  constructor(
    private readonly tokens: readonly Token[],
    /** The line to blame when the tokens run out. */
    private readonly endLine: number,
  ) {}

  get atEnd(): boolean {
    return this.pos >= this.tokens.length;
  }

  /** The word `k` tokens ahead (quoted strings included), or undefined past the end. */
  peek(k = 0): string | undefined {
    return this.tokens[this.pos + k]?.text;
  }

  peekToken(k = 0): Token | undefined {
    return this.tokens[this.pos + k];
  }

  get line(): number {
    return this.tokens[Math.min(this.pos, this.tokens.length - 1)]?.line ?? this.endLine;
  }

  /** The next token; `what` says what was expected, for the error at the end of the input. */
  next(what: string): Token {
    const t = this.tokens[this.pos];
    if (t === undefined) throw new NftSyntaxError(`unexpected end of rule, expecting ${what}`, this.endLine);
    this.pos++;
    return t;
  }

  word(what: string): string {
    return this.next(what).text;
  }

  /** Consume `w` if it is next. */
  eat(w: string): boolean {
    const t = this.tokens[this.pos];
    if (t !== undefined && !t.quoted && t.text === w) {
      this.pos++;
      return true;
    }
    return false;
  }

  expect(w: string, context: string): void {
    const t = this.next(`"${w}" ${context}`);
    if (t.quoted || t.text !== w)
      throw new NftSyntaxError(`syntax error, unexpected "${t.text}", expecting "${w}" ${context}`, t.line);
  }
}
