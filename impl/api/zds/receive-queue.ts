/**
 * What a ZDS transport end hands its one reader, in arrival order: a connection's frames, a
 * listener's accepted connections. Shared by the Linux transport (impl/linux/zds-transport.ts)
 * and the sim's (sim/zds/sim-zds-network.ts), so both queue, wait and end alike.
 *
 * A read with nothing queued waits for the next arrival or the end. After end(), what is still
 * queued is read first, then every read gets the end value. One reader at a time: a second
 * read while one waits replaces it (callers that must refuse that check `waiting` first).
 */
export class ReceiveQueue<T extends object, End> {
  private readonly items: T[] = [];
  private waiter: ((v: T | End) => void) | undefined;
  private ended: { readonly value: End } | undefined;

  /** A read is waiting (so nothing is queued and the end has not come). */
  get waiting(): boolean {
    return this.waiter !== undefined;
  }

  push(item: T): void {
    const w = this.waiter;
    if (w) {
      this.waiter = undefined;
      w(item);
    } else {
      this.items.push(item);
    }
  }

  next(): Promise<T | End> {
    const item = this.items.shift();
    if (item !== undefined) return Promise.resolve(item);
    if (this.ended) return Promise.resolve(this.ended.value);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  /** Later calls are ignored: the first end is the one readers see. */
  end(value: End): void {
    if (this.ended) return;
    this.ended = { value };
    const w = this.waiter;
    this.waiter = undefined;
    w?.(value);
  }

  /** Removes what is queued, for a closing owner to release (no reader will come for it). */
  takeAll(): T[] {
    return this.items.splice(0);
  }
}
