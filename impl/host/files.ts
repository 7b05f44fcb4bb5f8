/**
 * The FileSystem port: the few file operations the node agent's CNI installer needs on the
 * host's CNI directories. The sim/test adapter is an in-memory tree; the Linux adapter
 * (impl/linux/files.ts) uses node:fs with inotify watches.
 *
 * Paths are absolute POSIX paths. "Missing" is a normal answer (undefined / false), never an
 * exception: the primary CNI may not have written its config yet, and uninstall must be
 * idempotent. Other failures (permissions, not a directory) throw.
 */

export interface FileWatch {
  close(): void;
}

export interface FileSystem {
  /** The file's content as UTF-8 text, or undefined when it does not exist. */
  readText(path: string): Promise<string | undefined>;
  /** The file's bytes, or undefined when it does not exist. */
  readBytes(path: string): Promise<Uint8Array | undefined>;
  /**
   * Replace the file's content atomically: write a temporary file in the same directory, then
   * rename it over the target, so a concurrent reader (the container runtime reading the CNI
   * config) sees the old or the new content, never a partial one.
   */
  writeAtomic(path: string, data: string | Uint8Array, mode: number): Promise<void>;
  /** Remove a file; false when it was already gone. */
  remove(path: string): Promise<boolean>;
  /** Names (not paths) of the regular files in a directory; undefined when the directory is missing. */
  list(dir: string): Promise<string[] | undefined>;
  /** Create the directory and its parents when missing. */
  mkdirp(dir: string): Promise<void>;
  /**
   * Call `onChange` (possibly coalesced, possibly spuriously) after files in `dir` change. The
   * caller re-reads what it cares about; the event says nothing about which file changed.
   */
  watch(dir: string, onChange: () => void): FileWatch;
}
