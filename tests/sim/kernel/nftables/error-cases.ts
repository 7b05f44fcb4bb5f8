/**
 * Documents the model refuses, each with the line and words of its error; `kernel` says whether
 * real nft refuses it too (checked in tests/netns/fidelity/nftables-parser.spec.ts) or whether it
 * is a form the model does not support.
 */
import { chain } from './fixtures.js';

export const ERRORS: {
  name: string;
  doc: string;
  line: number;
  message: RegExp;
  /** `rejects`: real nft refuses the document too (tests/netns/fidelity/nftables-parser.spec.ts); `model`: nft takes it, the model does not support it. */
  kernel: 'rejects' | 'model';
}[] = [
  {
    name: 'unsupported statement',
    doc: chain(['queue num 1']),
    line: 4,
    message: /"queue" is not supported here \(supported matches: .*statements: .*counter/,
    kernel: 'model',
  },
  {
    name: 'unsupported meta key',
    doc: chain(['meta priority 1']),
    line: 4,
    message: /"meta priority" is not supported/,
    kernel: 'model',
  },
  {
    name: 'bad address',
    doc: chain(['ip daddr 1.2.3.400 accept']),
    line: 4,
    message: /Could not resolve hostname: "1.2.3.400"/,
    kernel: 'rejects',
  },
  {
    name: 'port above 65535',
    doc: chain(['tcp dport 70000 accept']),
    line: 4,
    message: /Service out of range: 70000/,
    kernel: 'rejects',
  },
  {
    name: 'unknown jump target',
    doc: chain(['jump nope']),
    line: 4,
    message: /No such file or directory: chain nope/,
    kernel: 'rejects',
  },
  {
    name: 'jump to a base chain',
    doc: chain(['jump c']),
    line: 4,
    message: /Operation not supported: jump to base chain c/,
    kernel: 'rejects',
  },
  {
    name: 'jump loop',
    doc: `${chain(['jump a'])}\nadd chain inet t a\nadd chain inet t b\nadd rule inet t a jump b\nadd rule inet t b jump a\n`,
    line: 10,
    message: /Too many links/,
    kernel: 'rejects',
  },
  {
    name: 'nat statement in a filter chain',
    doc: chain(['tcp dport 1 redirect to :5']),
    line: 4,
    message: /redirect is valid only in a nat-type chain at prerouting or output/,
    kernel: 'rejects',
  },
  {
    name: 'snat at output',
    doc: chain(['ip daddr 1.1.1.1 snat to 1.2.3.4'], 'output', { type: 'nat' }),
    line: 4,
    message: /snat is valid only in a nat-type chain at postrouting or input/,
    kernel: 'rejects',
  },
  {
    name: 'tproxy outside prerouting',
    doc: chain(['meta l4proto tcp tproxy to :1']),
    line: 4,
    message: /tproxy is valid only in a chain at prerouting/,
    kernel: 'rejects',
  },
  {
    name: 'tproxy without a transport match',
    doc: chain(['tproxy to :1'], 'prerouting'),
    line: 4,
    message: /Transparent proxy support requires transport protocol match/,
    kernel: 'rejects',
  },
  {
    name: 'redirect port without a transport match',
    doc: chain(['redirect to :5'], 'output', { type: 'nat' }),
    line: 4,
    message: /transport protocol mapping is only valid after transport protocol match/,
    kernel: 'rejects',
  },
  {
    name: 'dnat address in inet without a family',
    doc: chain(['tcp dport 1 dnat to 1.2.3.4'], 'output', { type: 'nat' }),
    line: 4,
    message: /ip or ip6 must be specified with address for inet tables/,
    kernel: 'rejects',
  },
  {
    name: 'nat chain at forward',
    doc: chain([], 'forward', { type: 'nat' }),
    line: 3,
    message: /a nat chain cannot attach to hook forward/,
    kernel: 'rejects',
  },
  {
    name: 'route chain at prerouting',
    doc: chain([], 'prerouting', { type: 'route' }),
    line: 3,
    message: /a route chain cannot attach to hook prerouting/,
    kernel: 'rejects',
  },
  {
    name: 'nat chain at priority -200',
    doc: chain([], 'output', { type: 'nat', priority: -200 }),
    line: 3,
    message: /priority must be above -200/,
    kernel: 'rejects',
  },
  {
    name: 'ip match in an ip6 table',
    doc: chain(['ip daddr 1.2.3.4 accept'], 'output', { family: 'ip6' }),
    line: 4,
    message: /conflicting protocols specified: ip6 vs. ip/,
    kernel: 'rejects',
  },
  {
    name: 'tcp and udp in one rule',
    doc: chain(['tcp dport 1 udp dport 2 accept']),
    line: 4,
    message: /conflicting protocols specified: tcp vs. udp/,
    kernel: 'rejects',
  },
  {
    name: 'statement after a verdict',
    doc: chain(['accept counter']),
    line: 4,
    message: /Statement after terminal statement has no effect/,
    kernel: 'rejects',
  },
  {
    name: 'missing set',
    doc: chain(['ip daddr @nope accept']),
    line: 4,
    message: /Set "nope" does not exist/,
    kernel: 'rejects',
  },
  {
    name: 'set of another type',
    doc: 'add table inet t\nadd set inet t s { type ipv4_addr ; }\nadd chain inet t c\nadd rule inet t c ip6 daddr @s accept\n',
    line: 4,
    message: /datatype mismatch, expected IPv4 address, expression has type IPv6 address/,
    kernel: 'rejects',
  },
  {
    name: 'prefix in a set without interval',
    doc: 'add table inet t\nadd set inet t s { type ipv4_addr ; }\nadd element inet t s { 10.0.0.0/8 }\n',
    line: 3,
    message: /You must add 'flags interval'/,
    kernel: 'rejects',
  },
  {
    name: 'delete a missing element',
    doc: 'add table inet t\nadd set inet t s { type ipv4_addr ; }\ndelete element inet t s { 10.0.0.1 }\n',
    line: 3,
    message: /No such file or directory: element 10.0.0.1/,
    kernel: 'rejects',
  },
  {
    name: 'delete a missing table',
    doc: 'delete table inet nope\n',
    line: 1,
    message: /No such file or directory: table inet nope/,
    kernel: 'rejects',
  },
  {
    name: 'rule in a missing table',
    doc: 'add rule inet nope c accept\n',
    line: 1,
    message: /table inet nope does not exist/,
    kernel: 'rejects',
  },
  {
    name: 'unknown command',
    doc: 'list ruleset\n',
    line: 1,
    message: /"list" is not a command the model supports/,
    kernel: 'model',
  },
  {
    name: 'unsupported family',
    doc: 'add table netdev t\n',
    line: 1,
    message: /family netdev is not supported/,
    kernel: 'model',
  },
  {
    name: 'base chain changes its hook',
    doc: `${chain([])}\nadd chain inet t c { type filter hook input priority 0 ; }\n`,
    line: 6,
    message: /Device or resource busy: chain c is already a filter chain at output/,
    kernel: 'rejects',
  },
  {
    name: 'unterminated string',
    doc: 'add table inet t\nadd chain inet t c\nadd rule inet t c comment "x\n',
    line: 3,
    message: /unterminated " string/,
    kernel: 'rejects',
  },
  {
    name: 'dstnat priority at output',
    doc: chain([], 'output', { type: 'nat', priority: 'dstnat' }),
    line: 3,
    message: /invalid priority expression value in this context: dstnat is for hook prerouting/,
    kernel: 'rejects',
  },
  {
    name: 'a keyword as a chain name',
    doc: 'table ip x {\n  chain fwd {\n  }\n}',
    line: 2,
    message: /unexpected fwd, expecting string: "fwd" is an nft keyword and cannot name a chain/,
    kernel: 'rejects',
  },
  {
    name: 'a quoted chain name',
    doc: 'table ip x {\n  chain "c" {\n  }\n}',
    line: 2,
    message: /unexpected quoted string, expecting string/,
    kernel: 'rejects',
  },
];
