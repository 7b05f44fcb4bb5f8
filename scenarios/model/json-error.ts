/**
 * Where a JSON text stops being JSON, as line and column. V8's JSON.parse messages give an
 * offset only for some errors ("Unexpected token ']', "[1,]" is not valid JSON" has none), so
 * after a failed JSON.parse a small strict scanner (RFC 8259) finds the first bad character.
 */

interface JsonSyntaxProblem {
  /** 0-based offset of the first character that cannot continue a JSON text. */
  readonly offset: number;
  /** 1-based line and column of that offset. */
  readonly line: number;
  readonly column: number;
  readonly problem: string;
}

class Stop extends Error {
  constructor(
    readonly offset: number,
    readonly problem: string,
  ) {
    super(problem);
  }
}

/** The first syntax error of `text`, or undefined when it is valid JSON. */
export function findJsonSyntaxError(text: string): JsonSyntaxProblem | undefined {
  let i = 0;
  const ws = (): void => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const describe = (): string =>
    i >= text.length ? 'unexpected end of input' : `unexpected ${JSON.stringify(text[i])}`;
  const expect = (what: string): never => {
    throw new Stop(i, `${describe()}, expected ${what}`);
  };
  const literal = (word: string): void => {
    for (const ch of word) {
      if (text[i] !== ch) expect(`${JSON.stringify(word)}`);
      i++;
    }
  };
  const string = (): void => {
    i++; // the opening quote
    for (;;) {
      if (i >= text.length) expect("a closing '\"'");
      const ch = text[i]!;
      if (ch === '"') {
        i++;
        return;
      }
      if (ch < ' ')
        throw new Stop(
          i,
          `control character U+${ch.charCodeAt(0).toString(16).padStart(4, '0')} in a string (escape it)`,
        );
      if (ch === '\\') {
        i++;
        const e = text[i];
        if (e === 'u') {
          for (let k = 1; k <= 4; k++)
            if (!/[0-9a-fA-F]/.test(text[i + k] ?? '')) {
              i += k;
              expect('a hex digit of a \\u escape');
            }
          i += 5;
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) {
          i++;
        } else {
          expect('an escape character (one of "\\/bfnrtu)');
        }
        continue;
      }
      i++;
    }
  };
  const number = (): void => {
    if (text[i] === '-') i++;
    if (text[i] === '0') i++;
    else if (/[1-9]/.test(text[i] ?? '')) while (/[0-9]/.test(text[i] ?? '')) i++;
    else expect('a digit');
    if (text[i] === '.') {
      i++;
      if (!/[0-9]/.test(text[i] ?? '')) expect('a digit after the decimal point');
      while (/[0-9]/.test(text[i] ?? '')) i++;
    }
    if (text[i] === 'e' || text[i] === 'E') {
      i++;
      if (text[i] === '+' || text[i] === '-') i++;
      if (!/[0-9]/.test(text[i] ?? '')) expect('a digit of the exponent');
      while (/[0-9]/.test(text[i] ?? '')) i++;
    }
  };
  const value = (depth: number): void => {
    if (depth > 10_000) throw new Stop(i, 'nesting too deep');
    ws();
    const ch = text[i];
    if (ch === '{') {
      i++;
      ws();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') expect('a double-quoted property name');
        string();
        ws();
        if (text[i] !== ':') expect("':' after a property name");
        i++;
        value(depth + 1);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return;
        }
        expect("',' or '}' after a property value");
      }
    }
    if (ch === '[') {
      i++;
      ws();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (;;) {
        value(depth + 1);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return;
        }
        expect("',' or ']' after an array element");
      }
    }
    if (ch === '"') return string();
    if (ch === 't') return literal('true');
    if (ch === 'f') return literal('false');
    if (ch === 'n') return literal('null');
    if (ch === '-' || /[0-9]/.test(ch ?? '')) return number();
    expect('a JSON value');
  };
  try {
    value(0);
    ws();
    if (i < text.length) expect('end of input after the JSON value');
    return undefined;
  } catch (e) {
    if (!(e instanceof Stop)) throw e;
    const before = text.slice(0, e.offset).split('\n');
    return { offset: e.offset, line: before.length, column: before[before.length - 1]!.length + 1, problem: e.problem };
  }
}
