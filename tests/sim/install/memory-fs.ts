/**
 * An in-memory FileSystem (impl/host/files.ts) for the installer's sim tests: a flat map of
 * absolute paths, directories implied by their files or made explicit, synchronous change
 * notifications (after each write/remove, like inotify after the rename), and a write log so
 * tests can assert that an idempotent pass writes nothing.
 */
import * as path from 'node:path';
import type { FileSystem, FileWatch } from '../../../impl/host/files.js';

export class MemoryFileSystem implements FileSystem {
  readonly files = new Map<string, { data: Uint8Array; mode: number }>();
  readonly dirs = new Set<string>(['/']);
  /** Every write and remove, in order ("write <path>", "remove <path>"). */
  readonly ops: string[] = [];
  private readonly watchers = new Map<string, Set<() => void>>();

  put(file: string, text: string, mode = 0o644): void {
    this.mkdirSync(path.posix.dirname(file));
    this.files.set(file, { data: new TextEncoder().encode(text), mode });
    this.notify(file);
  }

  text(file: string): string | undefined {
    const f = this.files.get(file);
    return f ? new TextDecoder().decode(f.data) : undefined;
  }

  private mkdirSync(dir: string): void {
    for (let d = dir; !this.dirs.has(d); d = path.posix.dirname(d)) this.dirs.add(d);
  }

  private notify(file: string): void {
    for (const fn of this.watchers.get(path.posix.dirname(file)) ?? []) fn();
  }

  async readText(file: string): Promise<string | undefined> {
    return this.text(file);
  }

  async readBytes(file: string): Promise<Uint8Array | undefined> {
    const f = this.files.get(file);
    return f ? new Uint8Array(f.data) : undefined;
  }

  async writeAtomic(file: string, data: string | Uint8Array, mode: number): Promise<void> {
    if (!this.dirs.has(path.posix.dirname(file))) throw new Error(`cannot write ${file}: ENOENT (no directory)`);
    this.files.set(file, {
      data: typeof data === 'string' ? new TextEncoder().encode(data) : new Uint8Array(data),
      mode,
    });
    this.ops.push(`write ${file}`);
    this.notify(file);
  }

  async remove(file: string): Promise<boolean> {
    const had = this.files.delete(file);
    if (had) {
      this.ops.push(`remove ${file}`);
      this.notify(file);
    }
    return had;
  }

  async list(dir: string): Promise<string[] | undefined> {
    if (!this.dirs.has(dir)) return undefined;
    return [...this.files.keys()].filter((f) => path.posix.dirname(f) === dir).map((f) => path.posix.basename(f));
  }

  async mkdirp(dir: string): Promise<void> {
    this.mkdirSync(dir);
  }

  watch(dir: string, onChange: () => void): FileWatch {
    const set = this.watchers.get(dir) ?? new Set();
    this.watchers.set(dir, set);
    set.add(onChange);
    return { close: () => set.delete(onChange) };
  }
}
