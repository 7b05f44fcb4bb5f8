/**
 * ipset(8) model: a registry of named sets per network namespace. Only hash:ip and hash:net,
 * which is what the host-probe rules use. `restore` takes `ipset save` lines.
 */
import { formatIp, parseIp, type Family, type IpAddress } from '../../../impl/api/ip/address.js';
import { formatPrefix, maskValue, parsePrefix } from '../../../impl/api/ip/prefix.js';
import { IpSetError } from './errors.js';
import { splitWords } from './lexer.js';
import type { IpSetView } from './types.js';

type IpSetType = 'hash:ip' | 'hash:net';

interface IpSetEntry {
  /** `10.0.0.1` for hash:ip, `10.0.0.0/24` for hash:net. */
  readonly text: string;
  readonly comment: string | undefined;
}

class IpSet implements IpSetView {
  /** prefix length → network value (as hex key) → entry. For hash:ip only the full length is used. */
  private readonly byLen = new Map<number, Map<bigint, IpSetEntry>>();
  constructor(
    readonly name: string,
    readonly type: IpSetType,
    readonly family: Family,
    readonly comments: boolean,
  ) {}

  private parse(text: string): { len: number; value: bigint; canonical: string } {
    try {
      if (this.type === 'hash:ip') {
        const a = parseIp(text);
        this.checkFamily(a, text);
        return { len: this.family === 4 ? 32 : 128, value: a.value, canonical: formatIp(a) };
      }
      const p = parsePrefix(text);
      this.checkFamily(p.addr, text);
      return { len: p.len, value: p.addr.value, canonical: formatPrefix(p) };
    } catch (e) {
      if (e instanceof IpSetError) throw e;
      throw new IpSetError(
        `ipset ${this.name} (${this.type}): "${text}" is not a valid ${this.type === 'hash:ip' ? 'address' : 'address or prefix'}`,
      );
    }
  }

  private checkFamily(a: IpAddress, text: string): void {
    if (a.family !== this.family)
      throw new IpSetError(
        `ipset ${this.name} is family inet${this.family === 6 ? '6' : ''}; "${text}" is IPv${a.family}`,
      );
  }

  add(text: string, comment?: string, opts: { exist?: boolean } = {}): void {
    if (comment !== undefined && !this.comments)
      throw new IpSetError(`ipset ${this.name} was created without "comment"; cannot add an entry with a comment`);
    const { len, value, canonical } = this.parse(text);
    let m = this.byLen.get(len);
    if (!m) {
      m = new Map();
      this.byLen.set(len, m);
    }
    if (m.has(value) && !opts.exist)
      throw new IpSetError(`ipset ${this.name}: element ${canonical} is already added (use exist to ignore)`);
    m.set(value, { text: canonical, comment });
  }

  del(text: string, opts: { exist?: boolean } = {}): void {
    const { len, value, canonical } = this.parse(text);
    const m = this.byLen.get(len);
    if (!m?.delete(value) && !opts.exist) throw new IpSetError(`ipset ${this.name}: element ${canonical} is not added`);
  }

  has(addr: IpAddress): boolean {
    if (addr.family !== this.family) return false;
    for (const [len, m] of this.byLen) {
      if (m.has(maskValue(addr.value, addr.family, len))) return true;
    }
    return false;
  }

  entries(): IpSetEntry[] {
    const out: IpSetEntry[] = [];
    for (const m of this.byLen.values()) out.push(...m.values());
    return out.sort((a, b) => (a.text < b.text ? -1 : a.text > b.text ? 1 : 0));
  }

  flush(): void {
    this.byLen.clear();
  }
}

export class IpSets {
  private readonly sets = new Map<string, IpSet>();

  create(name: string, type: IpSetType, family: Family, opts: { comment?: boolean; exist?: boolean } = {}): void {
    if (!/^[A-Za-z0-9_.:-]{1,31}$/.test(name))
      throw new IpSetError(`ipset name "${name}" is invalid (1..31 characters of letters, digits, _ . : -)`);
    if (type !== 'hash:ip' && type !== 'hash:net')
      throw new IpSetError(`ipset ${name}: type "${String(type)}" is not supported (supported: hash:ip, hash:net)`);
    const existing = this.sets.get(name);
    if (existing) {
      if (opts.exist && existing.type === type && existing.family === family) return;
      throw new IpSetError(`ipset ${name} already exists`);
    }
    this.sets.set(name, new IpSet(name, type, family, opts.comment ?? false));
  }

  private must(name: string): IpSet {
    const s = this.sets.get(name);
    if (!s) throw new IpSetError(`ipset ${name} does not exist`);
    return s;
  }

  add(name: string, entry: string, opts: { comment?: string; exist?: boolean } = {}): void {
    this.must(name).add(entry, opts.comment, opts);
  }

  del(name: string, entry: string, opts: { exist?: boolean } = {}): void {
    this.must(name).del(entry, opts);
  }

  /** Membership test of an address (for hash:net, any containing prefix). */
  test(name: string, addr: string): boolean {
    let a: IpAddress;
    try {
      a = parseIp(addr);
    } catch {
      throw new IpSetError(`ipset test ${name}: "${addr}" is not an address`);
    }
    return this.must(name).has(a);
  }

  flush(name: string): void {
    this.must(name).flush();
  }

  destroy(name: string): void {
    this.must(name);
    this.sets.delete(name);
  }

  get(name: string): IpSetView | undefined {
    return this.sets.get(name);
  }

  names(): string[] {
    return [...this.sets.keys()];
  }

  entries(name: string): IpSetEntry[] {
    return this.must(name).entries();
  }

  /** `ipset save` format. */
  save(): string {
    const out: string[] = [];
    for (const s of this.sets.values()) {
      out.push(`create ${s.name} ${s.type} family inet${s.family === 6 ? '6' : ''}${s.comments ? ' comment' : ''}`);
      for (const e of s.entries())
        out.push(`add ${s.name} ${e.text}${e.comment !== undefined ? ` comment "${e.comment}"` : ''}`);
    }
    return out.length ? `${out.join('\n')}\n` : '';
  }

  /**
   * `ipset restore` of `ipset save` lines (create/add/del/flush/destroy, -exist per line or
   * via opts). All-or-nothing: on error nothing changes. Unknown create options are rejected.
   */
  restore(text: string, opts: { exist?: boolean } = {}): void {
    const backup = new Map(this.sets);
    const cloned = new Map<string, IpSet>();
    // Copy-on-write: clone sets lazily so a failed restore leaves the originals untouched.
    const writable = (name: string): IpSet => {
      const s = this.must(name);
      if (cloned.get(name) === s) return s;
      const c = new IpSet(s.name, s.type, s.family, s.comments);
      for (const e of s.entries()) c.add(e.text, e.comment);
      this.sets.set(name, c);
      cloned.set(name, c);
      return c;
    };
    const lines = text.split('\n');
    try {
      for (let i = 0; i < lines.length; i++) {
        const line = (lines[i] as string).trim();
        if (line === '' || line.startsWith('#')) continue;
        try {
          const words = splitWords(line);
          let exist = opts.exist ?? false;
          const filtered = words.filter((w) => {
            if (w === '-exist' || w === '-!') {
              exist = true;
              return false;
            }
            return true;
          });
          const [cmd, name, ...rest] = filtered;
          if (!name) throw new IpSetError(`"${cmd ?? ''}" needs a set name`);
          switch (cmd) {
            case 'create':
            case '-N':
            case 'n': {
              const [type, ...o] = rest;
              let family: Family = 4;
              let comment = false;
              for (let k = 0; k < o.length; k++) {
                const w = o[k];
                if (w === 'family') {
                  const f = o[++k];
                  if (f === 'inet') family = 4;
                  else if (f === 'inet6') family = 6;
                  else throw new IpSetError(`family "${f ?? ''}" is not inet or inet6`);
                } else if (w === 'comment') comment = true;
                else if (w === 'hashsize' || w === 'maxelem' || w === 'bucketsize' || w === 'initval')
                  k++; // sizing only: no behaviour in the model
                else
                  throw new IpSetError(
                    `create option "${w ?? ''}" is not supported (supported: family, comment, hashsize, maxelem, bucketsize, initval)`,
                  );
              }
              this.create(name, type as IpSetType, family, { comment, exist });
              cloned.set(name, this.sets.get(name) as IpSet);
              break;
            }
            case 'add':
            case '-A':
            case 'a':
            case 'del':
            case '-D':
            case 'd': {
              const [entry, ...o] = rest;
              if (!entry) throw new IpSetError(`${cmd} ${name} needs an entry`);
              let comment: string | undefined;
              for (let k = 0; k < o.length; k++) {
                if (o[k] === 'comment' && (cmd === 'add' || cmd === '-A' || cmd === 'a')) comment = o[++k] ?? '';
                else throw new IpSetError(`entry option "${o[k] ?? ''}" is not supported (supported: comment "TEXT")`);
              }
              const s = writable(name);
              if (cmd === 'add' || cmd === '-A' || cmd === 'a') s.add(entry, comment, { exist });
              else s.del(entry, { exist });
              break;
            }
            case 'flush':
            case '-F':
              writable(name).flush();
              break;
            case 'destroy':
            case '-X':
              this.destroy(name);
              break;
            default:
              throw new IpSetError(
                `command "${cmd ?? ''}" is not supported (supported: create, add, del, flush, destroy)`,
              );
          }
        } catch (e) {
          throw new IpSetError(
            `ipset restore line ${i + 1}: ${e instanceof Error ? e.message : String(e)}\n  in line: ${lines[i] ?? ''}`,
          );
        }
      }
    } catch (e) {
      this.sets.clear();
      for (const [k, v] of backup) this.sets.set(k, v);
      throw e;
    }
  }
}
