/**
 * Real adapter of the FileSystem port: node:fs with inotify directory watches (fs.watch).
 * Atomic writes go to a hidden temporary in the target's directory (same filesystem, so the
 * rename is atomic; hidden, so a runtime scanning the CNI conf dir never loads it).
 */
import { randomBytes } from 'node:crypto';
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { chmod, mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import type { FileSystem, FileWatch } from '../host/files.js';

function isMissing(e: unknown): boolean {
  return (e as NodeJS.ErrnoException).code === 'ENOENT';
}

export class NodeFileSystem implements FileSystem {
  async readText(file: string): Promise<string | undefined> {
    try {
      return await readFile(file, 'utf8');
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw new Error(`cannot read ${file}: ${(e as Error).message}`, { cause: e });
    }
  }

  async readBytes(file: string): Promise<Uint8Array | undefined> {
    try {
      return await readFile(file);
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw new Error(`cannot read ${file}: ${(e as Error).message}`, { cause: e });
    }
  }

  async writeAtomic(file: string, data: string | Uint8Array, mode: number): Promise<void> {
    const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      await writeFile(tmp, data, { mode });
      await chmod(tmp, mode); // the umask may have narrowed the create mode
      await rename(tmp, file);
    } catch (e) {
      await rm(tmp, { force: true });
      throw new Error(`cannot write ${file}: ${(e as Error).message}`, { cause: e });
    }
  }

  async remove(file: string): Promise<boolean> {
    try {
      await rm(file);
      return true;
    } catch (e) {
      if (isMissing(e)) return false;
      throw new Error(`cannot remove ${file}: ${(e as Error).message}`, { cause: e });
    }
  }

  async list(dir: string): Promise<string[] | undefined> {
    try {
      const entries = await readdir(dir, { withFileTypes: true });
      return entries.filter((e) => e.isFile()).map((e) => e.name);
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw new Error(`cannot list ${dir}: ${(e as Error).message}`, { cause: e });
    }
  }

  async mkdirp(dir: string): Promise<void> {
    await mkdir(dir, { recursive: true });
  }

  watch(dir: string, onChange: () => void): FileWatch {
    let w: FSWatcher | undefined = fsWatch(dir, { persistent: false }, () => onChange());
    // A watch error (the directory was removed) ends the watch; the installer's resync still runs.
    w.on('error', () => {
      w?.close();
      w = undefined;
    });
    return {
      close: () => {
        w?.close();
        w = undefined;
      },
    };
  }
}
