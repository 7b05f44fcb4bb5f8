/**
 * Errors raised while loading rules. A RestoreError always names where (source, 1-based line),
 * the offending line text, what is wrong and what the model supports instead, because the rule
 * text is the artifact under test and its author must be able to fix it from the message alone.
 */
export class RestoreError extends Error {
  constructor(
    readonly line: number,
    readonly source: string,
    readonly lineText: string,
    readonly problem: string,
  ) {
    super(`${source}:${line}: ${problem}\n  in line: ${lineText}`);
    this.name = 'RestoreError';
  }
}

/**
 * Thrown by option/match/target parsers without line context; the restore parser catches it and
 * wraps it into a RestoreError carrying the line.
 */
export class RuleSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RuleSyntaxError';
  }
}

/** ipset registry and ipset-restore errors. */
export class IpSetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'IpSetError';
  }
}
