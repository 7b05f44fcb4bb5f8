/**
 * Packet traces: what happened to each packet, step by step — namespace, hook, table, chain,
 * rule (text and line), verdict, NAT and mark changes, routing decisions, device crossings and
 * the socket chosen. Rendered as text for people and kept as plain objects for JSON.
 */
import type { RuleStep, TableName, TableVerdict, Hook, CtState } from './netfilter/types.js';
import type { NftRuleStep } from './nftables/evaluate.js';

export type TraceEvent =
  | { readonly kind: 'packet'; readonly ns: string; readonly packet: string; readonly note: string }
  | {
      readonly kind: 'table';
      readonly ns: string;
      readonly hook: Hook;
      readonly table: TableName;
      readonly steps: readonly RuleStep[];
      readonly verdict: string;
    }
  /** One nft base chain run: `chain` is `FAMILY TABLE CHAIN`; steps name rules by chain, position and line. */
  | {
      readonly kind: 'nft';
      readonly ns: string;
      readonly hook: Hook;
      readonly chain: string;
      readonly type: 'filter' | 'nat' | 'route';
      readonly priority: number;
      readonly steps: readonly NftRuleStep[];
      readonly verdict: string;
    }
  | {
      readonly kind: 'conntrack';
      readonly ns: string;
      /** `OFF`: no rule of the family needs conntrack, so the namespace does not track it. */
      readonly state: CtState | 'INVALID' | 'OFF';
      readonly zone: number;
      readonly entry: number | undefined;
      readonly direction: string | undefined;
    }
  | { readonly kind: 'nat'; readonly ns: string; readonly hook: Hook; readonly what: string }
  | { readonly kind: 'mark'; readonly ns: string; readonly from: number; readonly to: number; readonly why: string }
  | { readonly kind: 'route'; readonly ns: string; readonly decision: string }
  | {
      readonly kind: 'xmit';
      readonly fromNs: string;
      readonly fromDev: string;
      readonly toNs: string;
      readonly toDev: string;
      readonly scrubbed: boolean;
    }
  | { readonly kind: 'deliver'; readonly ns: string; readonly socket: string }
  | { readonly kind: 'drop'; readonly ns: string; readonly reason: string }
  | { readonly kind: 'log'; readonly ns: string; readonly prefix: string; readonly packet: string };

export function verdictText(v: TableVerdict): string {
  switch (v.kind) {
    case 'accept':
      return 'ACCEPT';
    case 'drop':
      return 'DROP';
    case 'reject':
      return `REJECT (${v.with})`;
    case 'nat':
      return `NAT ${v.action.kind}`;
    case 'tproxy':
      return `TPROXY port ${v.port}`;
  }
}

/** Collects events for one packet exchange; a disabled trace costs one branch per event. */
export class Trace {
  readonly events: TraceEvent[] = [];
  constructor(readonly enabled: boolean) {}

  add(e: TraceEvent): void {
    if (this.enabled) this.events.push(e);
  }
}

export function renderTrace(events: readonly TraceEvent[]): string {
  const out: string[] = [];
  for (const e of events) {
    switch (e.kind) {
      case 'packet':
        out.push(`[${e.ns}] ${e.note}: ${e.packet}`);
        break;
      case 'table': {
        out.push(`[${e.ns}] ${e.hook} ${e.table}: ${e.verdict}`);
        for (const s of e.steps) {
          const where =
            s.position === 0 ? `${s.chain} policy` : `${s.chain} #${s.position}${s.line ? ` (line ${s.line})` : ''}`;
          out.push(`      ${where}: ${s.text}  => ${s.effect}`);
        }
        break;
      }
      case 'nft': {
        out.push(`[${e.ns}] ${e.hook} nft ${e.chain} (${e.type}, priority ${e.priority}): ${e.verdict}`);
        for (const s of e.steps) {
          const where =
            s.position === 0 ? `${s.chain} policy` : `${s.chain} #${s.position}${s.line ? ` (line ${s.line})` : ''}`;
          out.push(`      ${where}: ${s.text}  => ${s.effect}`);
        }
        break;
      }
      case 'conntrack':
        out.push(
          `[${e.ns}] conntrack: ${e.state}${e.direction ? ` (${e.direction})` : ''} zone ${e.zone}${e.entry ? ` entry #${e.entry}` : ''}`,
        );
        break;
      case 'nat':
        out.push(`[${e.ns}] ${e.hook} nat: ${e.what}`);
        break;
      case 'mark':
        out.push(`[${e.ns}] mark 0x${e.from.toString(16)} -> 0x${e.to.toString(16)} (${e.why})`);
        break;
      case 'route':
        out.push(`[${e.ns}] route: ${e.decision}`);
        break;
      case 'xmit':
        out.push(
          `[${e.fromNs}] xmit ${e.fromDev} -> [${e.toNs}] ${e.toDev}${e.scrubbed ? ' (netns crossed: mark and conntrack scrubbed)' : ''}`,
        );
        break;
      case 'deliver':
        out.push(`[${e.ns}] delivered to ${e.socket}`);
        break;
      case 'drop':
        out.push(`[${e.ns}] DROPPED: ${e.reason}`);
        break;
      case 'log':
        out.push(`[${e.ns}] LOG ${e.prefix}${e.packet}`);
        break;
    }
  }
  return out.join('\n');
}
