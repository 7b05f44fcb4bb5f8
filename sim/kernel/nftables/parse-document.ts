/**
 * An `nft -f` document applied to a working copy of the namespace's tables: the command form
 * knftables writes (`add table inet T`, `flush table ...`, `add chain inet T C { type nat hook
 * prerouting priority -100 ; }`, `add rule inet T C ...`, `insert rule`, `add set`, `add
 * element`, `delete element`, `delete table`, `flush ruleset`, ...) and the block form nft prints
 * (`table inet T { set S { ... } chain C { type ...; policy ...; RULES } }`). Commands run in
 * order against the working copy; the caller commits it only when the whole document and the
 * commit checks (commit.ts) pass, as one nft transaction.
 */
import { NftError, NftSyntaxError } from './errors.js';
import { tokenize, type Token } from './lexer.js';
import {
  CHAIN_TYPE_HOOKS,
  NFT_FAMILIES,
  NFT_HOOKS,
  tableKey,
  type NftBase,
  type NftChainState,
  type NftChainType,
  type NftFamily,
  type NftHook,
  type NftTableState,
} from './model.js';
import { parseRule } from './parse-rule.js';
import { NftSetState, SET_TYPES, type NftSetType } from './sets.js';
import { parsePriority } from './values.js';

export type Tables = Map<string, NftTableState>;

const COMMANDS =
  'add, create, insert, delete, destroy, flush (table, chain, rule, set, element), flush ruleset, table { ... }';

/** Tokens up to the end of the statement: a newline or `;` outside braces (anonymous sets may span lines). */
function takeStatement(tokens: readonly Token[], i: number): { readonly toks: Token[]; readonly next: number } {
  const toks: Token[] = [];
  let depth = 0;
  for (; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (!t.quoted) {
      if (depth === 0 && (t.text === '\n' || t.text === ';')) break;
      if (depth === 0 && t.text === '}') break; // the end of an enclosing block
      if (t.text === '{') depth++;
      else if (t.text === '}') depth--;
      if (t.text === '\n') continue;
    }
    toks.push(t);
  }
  return { toks, next: i };
}

function emptyTable(family: NftFamily, name: string): NftTableState {
  return { family, name, chains: new Map(), sets: new Map() };
}

/**
 * Words nft's grammar keeps for itself: they cannot name a table, chain or set (checked with nft
 * 1.0.6: `chain fwd { }` is "syntax error, unexpected fwd, expecting string"). Names that are
 * keywords only elsewhere (filter, nat, input, ...) are fine; nft knows more than these.
 */
const RESERVED_NAMES: ReadonlySet<string> = new Set(
  (
    'fwd dup queue limit quota meter synproxy flow offload vmap map elements interval comment counter log accept ' +
    'drop jump goto return reject continue type hook priority policy table chain set rule element add delete flush ' +
    'insert snat dnat redirect masquerade tproxy notrack mark meta ct ip ip6 inet tcp udp th fib flags iifname ' +
    'oifname skuid skgid icmp reset'
  ).split(' '),
);

/** A table, chain or set name as nft takes it: an unquoted identifier that is not a keyword. */
function checkName(t: Token, what: string): string {
  const name = t.text;
  if (t.quoted)
    throw new NftSyntaxError(
      `syntax error, unexpected quoted string, expecting string: a ${what} name is written bare`,
      t.line,
    );
  if (RESERVED_NAMES.has(name))
    throw new NftSyntaxError(
      `syntax error, unexpected ${name}, expecting string: "${name}" is an nft keyword and cannot name a ${what}`,
      t.line,
    );
  if (!/^[A-Za-z_.][A-Za-z0-9_./-]{0,255}$/.test(name))
    throw new NftSyntaxError(
      `${what} name "${name}": letters, digits, _ . / - (starting with a letter, _ or .)`,
      t.line,
    );
  return name;
}

export class DocumentParser {
  private i = 0;
  private readonly tokens: Token[];

  constructor(
    text: string,
    private readonly tables: Tables,
    private readonly source: string,
    /** The document's lines, for error messages. */
    private readonly lines: readonly string[],
    /** The next chain registration number (hook order among equal priorities). */
    private readonly nextReg: () => number,
  ) {
    try {
      this.tokens = tokenize(text);
    } catch (e) {
      throw this.wrap(e, 1);
    }
  }

  private wrap(e: unknown, line: number): unknown {
    if (e instanceof NftSyntaxError) {
      const l = e.line ?? line;
      return new NftError(l, this.source, this.lines[l - 1] ?? '', e.message);
    }
    return e;
  }

  private peek(): Token | undefined {
    return this.tokens[this.i];
  }

  private skipSeparators(): void {
    while (this.i < this.tokens.length) {
      const t = this.tokens[this.i]!;
      if (!t.quoted && (t.text === '\n' || t.text === ';')) this.i++;
      else break;
    }
  }

  run(): void {
    for (;;) {
      this.skipSeparators();
      const t = this.peek();
      if (!t) return;
      try {
        this.command();
      } catch (e) {
        // without a line of its own, an error is where the parser stopped (a block spans lines)
        throw this.wrap(e, this.tokens[Math.min(this.i, this.tokens.length) - 1]?.line ?? t.line);
      }
    }
  }

  private word(what: string): Token {
    const t = this.tokens[this.i];
    if (!t || (!t.quoted && (t.text === '\n' || t.text === ';')))
      throw new NftSyntaxError(`unexpected end of command, expecting ${what}`, t?.line);
    this.i++;
    return t;
  }

  private eat(w: string): boolean {
    const t = this.tokens[this.i];
    if (t && !t.quoted && t.text === w) {
      this.i++;
      return true;
    }
    return false;
  }

  private expect(w: string, context: string): void {
    const t = this.word(`"${w}" ${context}`);
    if (t.quoted || t.text !== w)
      throw new NftSyntaxError(`syntax error, unexpected "${t.text}", expecting "${w}" ${context}`, t.line);
  }

  /** The rest of the command must be empty. */
  private endOfCommand(what: string): void {
    const t = this.tokens[this.i];
    if (t && !(t.text === '\n' || t.text === ';' || t.text === '}'))
      throw new NftSyntaxError(`unexpected "${t.text}" after ${what}`, t.line);
  }

  private family(): NftFamily {
    const t = this.peek();
    if (t && !t.quoted && (NFT_FAMILIES as readonly string[]).includes(t.text)) {
      this.i++;
      return t.text as NftFamily;
    }
    if (t && ['arp', 'bridge', 'netdev'].includes(t.text))
      throw new NftSyntaxError(`family ${t.text} is not supported (the model supports ip, ip6 and inet)`, t.line);
    return 'ip'; // nft's default family
  }

  private tableRef(): { family: NftFamily; name: string; line: number } {
    const family = this.family();
    const t = this.word('a table name');
    return { family, name: checkName(t, 'table'), line: t.line };
  }

  private table(family: NftFamily, name: string, line: number): NftTableState {
    const t = this.tables.get(tableKey(family, name));
    if (!t)
      throw new NftSyntaxError(
        `Could not process rule: No such file or directory: table ${family} ${name} does not exist (add table ${family} ${name} first)`,
        line,
      );
    return t;
  }

  private command(): void {
    const first = this.word('a command');
    const verb = first.text;
    if (verb === 'table') return this.tableCommand('add', first.line);
    if (verb === 'flush' && this.eat('ruleset')) {
      this.endOfCommand('flush ruleset');
      this.tables.clear();
      return;
    }
    if (!['add', 'create', 'insert', 'delete', 'destroy', 'flush'].includes(verb))
      throw new NftSyntaxError(`"${verb}" is not a command the model supports (${COMMANDS})`, first.line);
    const obj = this.word('table, chain, rule, set or element');
    switch (obj.text) {
      case 'table':
        return this.tableCommand(verb, obj.line);
      case 'chain':
        return this.chainCommand(verb, obj.line);
      case 'rule':
        return this.ruleCommand(verb, obj.line);
      case 'set':
        return this.setCommand(verb, obj.line);
      case 'element':
        return this.elementCommand(verb, obj.line);
      default:
        throw new NftSyntaxError(`"${verb} ${obj.text}" is not supported (${COMMANDS})`, obj.line);
    }
  }

  private tableCommand(verb: string, line: number): void {
    const { family, name } = this.tableRef();
    const key = tableKey(family, name);
    switch (verb) {
      case 'add':
      case 'create': {
        if (verb === 'create' && this.tables.has(key))
          throw new NftSyntaxError(`Could not process rule: File exists: table ${family} ${name}`, line);
        if (!this.tables.has(key)) this.tables.set(key, emptyTable(family, name));
        if (this.eat('{')) this.tableBody(this.tables.get(key)!);
        else this.endOfCommand(`${verb} table`);
        return;
      }
      case 'delete':
      case 'destroy':
        this.endOfCommand(`${verb} table`);
        if (!this.tables.delete(key) && verb === 'delete')
          throw new NftSyntaxError(`Could not process rule: No such file or directory: table ${family} ${name}`, line);
        return;
      case 'flush': {
        this.endOfCommand('flush table');
        // Rules go; chains and sets (with their elements) stay: checked on the real kernel.
        for (const c of this.table(family, name, line).chains.values()) c.rules = [];
        return;
      }
      default:
        throw new NftSyntaxError(`"${verb} table" is not supported (add, create, delete, destroy, flush)`, line);
    }
  }

  /** `{ chain C { ... } set S { ... } ... }` after `table F N`. */
  private tableBody(t: NftTableState): void {
    for (;;) {
      this.skipSeparators();
      const w = this.word('chain, set or }');
      if (!w.quoted && w.text === '}') return;
      if (w.text === 'chain') {
        const n = this.word('a chain name');
        const fresh = !t.chains.has(n.text);
        const chain = this.addChain(t, checkName(n, 'chain'), n.line);
        this.expect('{', `after chain ${n.text}`);
        this.chainBody(t, chain, true, fresh);
        continue;
      }
      if (w.text === 'set') {
        const n = this.word('a set name');
        this.expect('{', `after set ${n.text}`);
        this.setBody(t, checkName(n, 'set'), n.line);
        continue;
      }
      throw new NftSyntaxError(
        `"${w.text}" in a table block is not supported (chain NAME { ... }, set NAME { ... })`,
        w.line,
      );
    }
  }

  private addChain(t: NftTableState, name: string, line: number): NftChainState {
    let c = t.chains.get(name);
    if (!c) {
      c = { name, base: undefined, rules: [], line, reg: this.nextReg() };
      t.chains.set(name, c);
    }
    return c;
  }

  /**
   * A chain block: the base chain's `type T hook H priority P;` and `policy P;`, then (in the
   * block form) its rules, one per line.
   */
  private chainBody(t: NftTableState, chain: NftChainState, rulesAllowed: boolean, fresh: boolean): void {
    let spec:
      { type?: NftChainType; hook?: NftHook; priority?: number; policy?: 'accept' | 'drop'; line: number } | undefined;
    for (;;) {
      this.skipSeparators();
      const head = this.peek();
      if (!head) throw new NftSyntaxError(`unexpected end of input in chain ${chain.name}: missing }`);
      if (!head.quoted && head.text === '}') {
        this.i++;
        break;
      }
      if (!head.quoted && head.text === 'type') {
        this.i++;
        const type = this.word('filter, nat or route').text;
        if (type !== 'filter' && type !== 'nat' && type !== 'route')
          throw new NftSyntaxError(`chain type "${type}" is not supported (filter, nat, route)`, head.line);
        this.expect('hook', `after type ${type}`);
        const hook = this.word('a hook').text;
        if (!(NFT_HOOKS as readonly string[]).includes(hook))
          throw new NftSyntaxError(`hook "${hook}" is not supported (${NFT_HOOKS.join(', ')})`, head.line);
        if (this.eat('device'))
          throw new NftSyntaxError('device is for netdev/ingress chains, which the model does not support', head.line);
        this.expect('priority', `after hook ${hook}`);
        const { toks, next } = takeStatement(this.tokens, this.i);
        this.i = next;
        spec = {
          ...spec,
          type,
          hook: hook as NftHook,
          priority: parsePriority(
            toks.map((x) => x.text),
            hook as NftHook,
          ),
          line: head.line,
        };
        continue;
      }
      if (!head.quoted && head.text === 'policy') {
        this.i++;
        const p = this.word('accept or drop').text;
        if (p !== 'accept' && p !== 'drop')
          throw new NftSyntaxError(`policy "${p}": a chain policy is accept or drop`, head.line);
        spec = { line: head.line, ...spec, policy: p };
        continue;
      }
      if (!head.quoted && head.text === 'comment') {
        this.i++;
        this.word('a quoted comment');
        continue;
      }
      if (!rulesAllowed)
        throw new NftSyntaxError(
          `"${head.text}" in a chain specification: add rules with add rule (a chain spec holds type, hook, priority, policy)`,
          head.line,
        );
      const { toks, next } = takeStatement(this.tokens, this.i);
      this.i = next;
      this.appendRule(t, chain, toks, head.line, false);
    }
    if (spec) this.setBase(t, chain, spec, fresh);
  }

  private setBase(
    t: NftTableState,
    chain: NftChainState,
    spec: { type?: NftChainType; hook?: NftHook; priority?: number; policy?: 'accept' | 'drop'; line: number },
    fresh: boolean,
  ): void {
    if (spec.type === undefined || spec.hook === undefined || spec.priority === undefined) {
      if (spec.policy !== undefined && chain.base) {
        t.chains.set(chain.name, { ...chain, base: { ...chain.base, policy: spec.policy } });
        return;
      }
      throw new NftSyntaxError(
        `chain ${chain.name}: a policy needs a base chain (type T hook H priority P)`,
        spec.line,
      );
    }
    const { type, hook, priority } = spec;
    if (!CHAIN_TYPE_HOOKS[type].includes(hook))
      throw new NftSyntaxError(
        `Could not process rule: Operation not supported: a ${type} chain cannot attach to hook ${hook} (${type}: ${CHAIN_TYPE_HOOKS[type].join(', ')})`,
        spec.line,
      );
    if (type === 'nat' && priority <= -200)
      throw new NftSyntaxError(
        `Could not process rule: Operation not supported: a nat chain's priority must be above -200 (conntrack), got ${priority}`,
        spec.line,
      );
    const base: NftBase = { type, hook, priority, policy: spec.policy ?? chain.base?.policy ?? 'accept' };
    if (chain.base) {
      const b = chain.base;
      if (b.type !== type || b.hook !== hook || b.priority !== priority)
        throw new NftSyntaxError(
          `Could not process rule: Device or resource busy: chain ${chain.name} is already a ${b.type} chain at ${b.hook} priority ${b.priority} (delete it to change its hook)`,
          spec.line,
        );
    } else if (!fresh) {
      // a regular chain cannot become a base chain in place
      throw new NftSyntaxError(
        `Could not process rule: File exists: chain ${chain.name} is a regular chain`,
        spec.line,
      );
    }
    t.chains.set(chain.name, { ...chain, base });
  }

  private chainCommand(verb: string, line: number): void {
    const { family, name: tname } = this.tableRef();
    const t = this.table(family, tname, line);
    const n = this.word('a chain name');
    const name = checkName(n, 'chain');
    switch (verb) {
      case 'add':
      case 'create': {
        const existed = t.chains.has(name);
        if (verb === 'create' && existed)
          throw new NftSyntaxError(`Could not process rule: File exists: chain ${name}`, line);
        const c = this.addChain(t, name, line);
        if (this.eat('{')) this.chainBody(t, c, false, !existed);
        else this.endOfCommand(`${verb} chain`);
        return;
      }
      case 'delete':
      case 'destroy': {
        this.endOfCommand(`${verb} chain`);
        const c = t.chains.get(name);
        if (!c) {
          if (verb === 'delete')
            throw new NftSyntaxError(`Could not process rule: No such file or directory: chain ${name}`, line);
          return;
        }
        if (c.rules.length > 0)
          throw new NftSyntaxError(
            `Could not process rule: Device or resource busy: chain ${name} has rules (flush it first)`,
            line,
          );
        t.chains.delete(name);
        return;
      }
      case 'flush': {
        this.endOfCommand('flush chain');
        const c = t.chains.get(name);
        if (!c) throw new NftSyntaxError(`Could not process rule: No such file or directory: chain ${name}`, line);
        c.rules = [];
        return;
      }
      default:
        throw new NftSyntaxError(`"${verb} chain" is not supported (add, create, delete, destroy, flush)`, line);
    }
  }

  private ruleCommand(verb: string, line: number): void {
    if (verb !== 'add' && verb !== 'insert')
      throw new NftSyntaxError(
        `"${verb} rule" is not supported (add rule, insert rule; rules go with flush chain/table)`,
        line,
      );
    const { family, name: tname } = this.tableRef();
    const t = this.table(family, tname, line);
    const n = this.word('a chain name');
    const c = t.chains.get(n.text);
    if (!c)
      throw new NftSyntaxError(
        `Could not process rule: No such file or directory: chain ${family} ${tname} ${n.text}`,
        n.line,
      );
    if (this.peek()?.text === 'position' || this.peek()?.text === 'handle' || this.peek()?.text === 'index')
      throw new NftSyntaxError(
        `"${verb} rule ... ${this.peek()!.text}" is not supported (rules are appended or inserted first)`,
        line,
      );
    const { toks, next } = takeStatement(this.tokens, this.i);
    this.i = next;
    this.appendRule(t, c, toks, line, verb === 'insert');
  }

  private appendRule(t: NftTableState, c: NftChainState, toks: readonly Token[], line: number, first: boolean): void {
    const rule = parseRule(toks, t, { line: toks[0]?.line ?? line, source: this.source });
    c.rules = first ? [rule, ...c.rules] : [...c.rules, rule];
  }

  private setCommand(verb: string, line: number): void {
    const { family, name: tname } = this.tableRef();
    const t = this.table(family, tname, line);
    const n = this.word('a set name');
    const name = checkName(n, 'set');
    switch (verb) {
      case 'add':
      case 'create':
        if (verb === 'create' && t.sets.has(name))
          throw new NftSyntaxError(`Could not process rule: File exists: set ${name}`, line);
        this.expect('{', `after ${verb} set ${name} (a set needs { type T ; })`);
        this.setBody(t, name, line);
        return;
      case 'delete':
      case 'destroy': {
        this.endOfCommand(`${verb} set`);
        if (!t.sets.has(name)) {
          if (verb === 'delete')
            throw new NftSyntaxError(`Could not process rule: No such file or directory: set ${name}`, line);
          return;
        }
        for (const ch of t.chains.values())
          for (const r of ch.rules)
            if (r.listing.includes(`@${name}`))
              throw new NftSyntaxError(
                `Could not process rule: Device or resource busy: set ${name} is used by a rule in chain ${ch.name}`,
                line,
              );
        t.sets.delete(name);
        return;
      }
      case 'flush': {
        this.endOfCommand('flush set');
        const s = t.sets.get(name);
        if (!s) throw new NftSyntaxError(`Could not process rule: No such file or directory: set ${name}`, line);
        s.flush();
        return;
      }
      default:
        throw new NftSyntaxError(`"${verb} set" is not supported (add, create, delete, destroy, flush)`, line);
    }
  }

  /** `{ type T ; flags interval ; comment "..." ; elements = { ... } }` after `set NAME`. */
  private setBody(t: NftTableState, name: string, line: number): void {
    let type: NftSetType | undefined;
    let interval = false;
    let comment: string | undefined;
    let elements: string[] = [];
    for (;;) {
      this.skipSeparators();
      const w = this.word('type, flags, comment, elements or }');
      if (!w.quoted && w.text === '}') break;
      if (w.text === 'type') {
        const ty = this.word('a set type').text;
        if (!(SET_TYPES as readonly string[]).includes(ty))
          throw new NftSyntaxError(`set type "${ty}" is not supported (${SET_TYPES.join(', ')})`, w.line);
        type = ty as NftSetType;
      } else if (w.text === 'flags') {
        for (;;) {
          const f = this.word('a set flag').text;
          if (f === 'interval') interval = true;
          else if (f !== 'constant' && f !== 'dynamic' && f !== 'timeout')
            throw new NftSyntaxError(`set flag "${f}" is not supported (interval, constant)`, w.line);
          if (!this.eat(',')) break;
        }
      } else if (w.text === 'comment') {
        const c = this.word('a quoted comment');
        if (!c.quoted) throw new NftSyntaxError('a set comment is a "quoted string"', c.line);
        comment = c.text;
      } else if (w.text === 'elements') {
        this.expect('=', 'after elements');
        elements = this.elementList();
      } else if (w.text === 'size' || w.text === 'policy' || w.text === 'auto-merge') {
        this.word(`a ${w.text} value`);
      } else
        throw new NftSyntaxError(
          `"${w.text}" in a set is not supported (type, flags interval, comment, elements = { ... })`,
          w.line,
        );
    }
    if (type === undefined) throw new NftSyntaxError(`set ${name}: a set needs a type (type ipv4_addr ;)`, line);
    const existing = t.sets.get(name);
    let set: NftSetState;
    if (existing) {
      if (existing.type !== type || existing.interval !== interval)
        throw new NftSyntaxError(
          `Could not process rule: File exists: set ${name} exists with type ${existing.type}${existing.interval ? ', flags interval' : ''}`,
          line,
        );
      set = existing;
    } else {
      set = new NftSetState(name, type, interval, comment);
      t.sets.set(name, set);
    }
    for (const e of elements) set.add(set.parseElement(e));
  }

  /** `{ a, b, ... }` (the opening brace next). */
  private elementList(): string[] {
    this.expect('{', 'to open the element list');
    const out: string[] = [];
    for (;;) {
      while (this.eat('\n'));
      const w = this.word('an element or }');
      if (!w.quoted && w.text === '}') return out;
      out.push(w.text);
      while (this.eat('\n'));
      if (this.eat(',')) continue;
      this.expect('}', 'to close the element list');
      return out;
    }
  }

  private elementCommand(verb: string, line: number): void {
    const { family, name: tname } = this.tableRef();
    const t = this.table(family, tname, line);
    const n = this.word('a set name');
    const set = t.sets.get(n.text);
    if (!set)
      throw new NftSyntaxError(
        `Could not process rule: No such file or directory: set ${family} ${tname} ${n.text}`,
        n.line,
      );
    const elems = this.elementList().map((e) => set.parseElement(e));
    this.endOfCommand(`${verb} element`);
    switch (verb) {
      case 'add':
      case 'create':
        for (const e of elems) {
          if (verb === 'create' && set.has(e.lo))
            throw new NftSyntaxError(`Could not process rule: File exists: element ${e.text}`, line);
          set.add(e);
        }
        return;
      case 'delete':
      case 'destroy':
        for (const e of elems)
          if (!set.delete(e) && verb === 'delete')
            throw new NftSyntaxError(
              `Could not process rule: No such file or directory: element ${e.text} is not in set ${n.text}`,
              line,
            );
        return;
      default:
        throw new NftSyntaxError(`"${verb} element" is not supported (add, create, delete, destroy)`, line);
    }
  }
}
