/**
 * Errors raised while applying an `nft -f` document. An NftError names where (source, 1-based
 * line), the offending line, what is wrong and what the model supports instead, as RestoreError
 * does for iptables: the rule text is the artifact under test and its author must be able to fix
 * it from the message alone. One document is one transaction: on an NftError nothing changed.
 */
export class NftError extends Error {
  constructor(
    readonly line: number,
    readonly source: string,
    readonly lineText: string,
    readonly problem: string,
  ) {
    super(`${source}:${line}: ${problem}\n  in line: ${lineText}`);
    this.name = 'NftError';
  }
}

/**
 * Thrown by the rule and value parsers without line context (or with the line of the token that
 * failed); the document parser wraps it into an NftError carrying source and line.
 */
export class NftSyntaxError extends Error {
  constructor(
    message: string,
    /** The line of the token the problem is at, when the thrower knows it. */
    readonly line?: number,
  ) {
    super(message);
    this.name = 'NftSyntaxError';
  }
}

/** A run-time call on the nftables state (deleteTable, addElements, ...) named something absent or invalid. */
export class NftStateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NftStateError';
  }
}
