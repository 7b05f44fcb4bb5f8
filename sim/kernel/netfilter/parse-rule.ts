/**
 * One rule specification (the words after `-A CHAIN`) → RuleSpec(s). Comma lists in -s/-d expand
 * to one rule per address (source-major), as iptables does. Every word must be understood:
 * an unknown option, module or target is an error, never skipped.
 */
import { formatPrefix, type IpPrefix } from '../../../impl/api/ip/prefix.js';
import { RuleSyntaxError } from './errors.js';
import { createMatch, parseAddrOrPrefix, PortsMatch } from './matches.js';
import type { AddrSpec, IfaceSpec, MatchInstance, RuleContext, RuleSpec, TargetInstance } from './rule.js';
import { createTarget } from './targets.js';
import { formatProto, parseProto, PROTO_TCP, PROTO_UDP } from './values.js';

const GENERIC: Record<string, string> = {
  '-s': '-s',
  '--source': '-s',
  '--src': '-s',
  '-d': '-d',
  '--destination': '-d',
  '--dst': '-d',
  '-i': '-i',
  '--in-interface': '-i',
  '-o': '-o',
  '--out-interface': '-o',
  '-p': '-p',
  '--protocol': '-p',
  '-m': '-m',
  '--match': '-m',
  '-j': '-j',
  '--jump': '-j',
  '-g': '-g',
  '--goto': '-g',
};

/** Options that implicitly load the protocol's module after `-p tcp|udp`, as iptables does. */
const IMPLICIT_PORT_OPTS = new Set([
  '--sport',
  '--source-port',
  '--dport',
  '--destination-port',
  '--tcp-flags',
  '--syn',
]);

function parseIface(text: string, opt: string): string {
  if (text.length === 0 || text.length > 15 || /[\s/]/.test(text)) {
    throw new RuleSyntaxError(
      `${opt}: "${text}" is not a valid interface name (1..15 characters, no "/" or spaces; "+" suffix is a wildcard)`,
    );
  }
  return text;
}

interface ParseRuleEnv extends Omit<RuleContext, 'proto'> {
  hasUserChain(name: string): boolean;
}

export function parseRuleSpec(words: readonly string[], env: ParseRuleEnv): RuleSpec[] {
  const rc: RuleContext = { ...env, proto: undefined };
  let srcs: IpPrefix[] | undefined;
  let dsts: IpPrefix[] | undefined;
  let srcNeg = false;
  let dstNeg = false;
  let inIface: IfaceSpec | undefined;
  let outIface: IfaceSpec | undefined;
  const matches: MatchInstance[] = [];
  let target: TargetInstance | undefined;
  let i = 0;
  const seenGeneric = new Set<string>();

  while (i < words.length) {
    let word = words[i++] as string;
    let neg = false;
    if (word === '!') {
      neg = true;
      if (i >= words.length) throw new RuleSyntaxError('"!" at the end of the rule: it must precede an option');
      word = words[i++] as string;
    }
    const opt = word;
    const take = (): string => {
      if (i >= words.length) throw new RuleSyntaxError(`option "${opt}" needs an argument`);
      const w = words[i++] as string;
      if (w === '!') throw new RuleSyntaxError(`option "${opt}": "!" goes before the option, not after it`);
      return w;
    };
    const generic = GENERIC[opt];
    if (generic) {
      if (generic !== '-m' && seenGeneric.has(generic))
        throw new RuleSyntaxError(`option "${generic}" given more than once`);
      seenGeneric.add(generic);
      switch (generic) {
        case '-s':
        case '-d': {
          const text = take();
          const items = text.split(',');
          if (neg && items.length > 1)
            throw new RuleSyntaxError(
              `! ${generic} with several addresses ("${text}") is not allowed (iptables refuses it)`,
            );
          const list = items.map((t) => parseAddrOrPrefix(t, generic, rc));
          if (generic === '-s') {
            srcs = list;
            srcNeg = neg;
          } else {
            dsts = list;
            dstNeg = neg;
          }
          continue;
        }
        case '-i':
        case '-o': {
          const spec = { neg, name: parseIface(take(), generic) };
          if (generic === '-i') inIface = spec;
          else outIface = spec;
          continue;
        }
        case '-p':
          rc.proto = { num: parseProto(take()), neg };
          continue;
        case '-m': {
          if (neg) throw new RuleSyntaxError('"!" cannot negate -m; negate the module\'s option instead');
          const name = take();
          // One tcp/udp instance per rule: `-p tcp --dport 1 -m tcp` extends the implicit one.
          const existing = name === 'tcp' || name === 'udp' ? matches.find((m) => m.module === name) : undefined;
          if (existing) continue;
          matches.push(createMatch(name));
          continue;
        }
        case '-j':
        case '-g': {
          if (neg) throw new RuleSyntaxError(`"!" cannot negate ${generic}`);
          if (target) throw new RuleSyntaxError('only one -j/-g per rule');
          const name = take();
          target = createTarget(name, generic === '-g', env.hasUserChain(name));
          continue;
        }
        default:
          break;
      }
    }
    if (!opt.startsWith('-')) throw new RuleSyntaxError(`unexpected word "${opt}" (expected an option)`);
    if (!neg && target && target.parseOption(opt, take, rc)) continue;
    let handled = false;
    for (let k = matches.length - 1; k >= 0 && !handled; k--) {
      handled = (matches[k] as MatchInstance).parseOption(opt, neg, take, rc);
    }
    if (handled) continue;
    if (
      IMPLICIT_PORT_OPTS.has(opt) &&
      rc.proto &&
      !rc.proto.neg &&
      (rc.proto.num === PROTO_TCP || rc.proto.num === PROTO_UDP)
    ) {
      const m = new PortsMatch(rc.proto.num === PROTO_TCP ? 'tcp' : 'udp');
      if (m.parseOption(opt, neg, take)) {
        matches.push(m);
        continue;
      }
    }
    if (neg && target && target.parseOption(opt, take, rc))
      throw new RuleSyntaxError(`target option "${opt}" cannot be negated`);
    throw new RuleSyntaxError(
      `unknown option "${opt}"${matches.length ? ` for modules ${matches.map((m) => m.module).join(', ')}` : ' (no match module loaded: did you forget -m or -p?)'}${target ? ` or target ${target.name}` : ''}`,
    );
  }

  for (const m of matches) m.finish(rc);
  target?.finish(rc);

  if (rc.builtinHook) {
    if (inIface && (rc.builtinHook === 'OUTPUT' || rc.builtinHook === 'POSTROUTING'))
      throw new RuleSyntaxError(`can't use -i with ${rc.builtinHook}`);
    if (outIface && (rc.builtinHook === 'PREROUTING' || rc.builtinHook === 'INPUT'))
      throw new RuleSyntaxError(`can't use -o with ${rc.builtinHook}`);
  }
  if (target?.tables && !target.tables.includes(rc.table)) {
    throw new RuleSyntaxError(
      `target ${target.name} is not valid in the ${rc.table} table (the kernel allows it only in: ${target.tables.join(', ')})`,
    );
  }

  const proto = rc.proto && rc.proto.num === 0 && !rc.proto.neg ? undefined : rc.proto;
  const tail = [
    ...(proto ? [`${proto.neg ? '! ' : ''}-p ${formatProto(proto.num)}`] : []),
    ...matches.map((m) => m.render()),
    ...(target ? [target.render()] : []),
  ];
  const out: RuleSpec[] = [];
  for (const s of srcs ?? [undefined]) {
    for (const d of dsts ?? [undefined]) {
      const src: AddrSpec | undefined = s && { neg: srcNeg, prefix: s };
      const dst: AddrSpec | undefined = d && { neg: dstNeg, prefix: d };
      const parts: string[] = [];
      if (src) parts.push(`${src.neg ? '! ' : ''}-s ${formatPrefix(src.prefix)}`);
      if (dst) parts.push(`${dst.neg ? '! ' : ''}-d ${formatPrefix(dst.prefix)}`);
      if (inIface) parts.push(`${inIface.neg ? '! ' : ''}-i ${inIface.name}`);
      if (outIface) parts.push(`${outIface.neg ? '! ' : ''}-o ${outIface.name}`);
      parts.push(...tail);
      out.push({ src, dst, inIface, outIface, proto, matches, target, text: parts.join(' ') });
    }
  }
  return out;
}
