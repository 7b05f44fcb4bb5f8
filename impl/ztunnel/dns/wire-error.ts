/** A DNS message that does not decode: says what was wrong and at which byte. */
export class DnsWireError extends Error {
  constructor(
    what: string,
    readonly offset: number,
  ) {
    super(`malformed DNS message at byte ${offset}: ${what}`);
    this.name = 'DnsWireError';
  }
}
