/**
 * What a real-kernel test must leave untouched in the root network namespace: links, addresses,
 * routes of every table, policy rules and both families' netfilter rules. Volatile parts
 * (iptables-save timestamps and counters, link statistics) are normalised away, so two snapshots
 * are equal exactly when the configuration is.
 */
import { run } from './ip.js';

interface RootSnapshot {
  readonly links: string;
  readonly addresses: string;
  readonly routes: string;
  readonly rules: string;
  readonly iptables: string;
  readonly ip6tables: string;
}

function normaliseSave(text: string): string {
  return text
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.replace(/\[\d+:\d+\]/g, '[0:0]'))
    .join('\n');
}

export async function rootSnapshot(): Promise<RootSnapshot> {
  const [links, addresses, routes, rules, iptables, ip6tables] = await Promise.all([
    run(['ip', '-o', 'link', 'show']),
    run(['ip', '-o', 'addr', 'show']),
    run(['ip', 'route', 'show', 'table', 'all']).then(
      async (v4) => v4 + (await run(['ip', '-6', 'route', 'show', 'table', 'all'])),
    ),
    run(['ip', 'rule', 'show']).then(async (v4) => v4 + (await run(['ip', '-6', 'rule', 'show']))),
    // A failed save is an error: two "unavailable" snapshots would compare equal and prove nothing.
    run(['iptables-save']).then(normaliseSave),
    run(['ip6tables-save']).then(normaliseSave),
  ]);
  return { links, addresses, routes, rules, iptables, ip6tables };
}
