/**
 * Label and field selectors in the API's string syntax, compiled to predicates. Parse errors
 * are 400 BadRequest, as the API server answers.
 */
import { KubeApiError } from '../../impl/host/kube.js';

export type Labels = Readonly<Record<string, string>> | undefined;
export type LabelPredicate = (labels: Labels) => boolean;

type Requirement =
  | { op: 'eq' | 'ne'; key: string; value: string }
  | { op: 'in' | 'notin'; key: string; values: readonly string[] }
  | { op: 'exists' | 'notexists'; key: string };

function badSelector(kind: string, selector: string, why: string): KubeApiError {
  return new KubeApiError(400, 'BadRequest', `unable to parse ${kind} selector "${selector}": ${why}`);
}

/** Splits on commas that are not inside parentheses. */
function splitTerms(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out.map((t) => t.trim()).filter((t) => t !== '');
}

const KEY = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?\/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$/;

function parseRequirement(term: string, selector: string): Requirement {
  let m = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
  if (m) {
    const values = m[3]!.split(',').map((v) => v.trim()).filter((v) => v !== '');
    return { op: m[2] === 'in' ? 'in' : 'notin', key: checkKey(m[1]!, selector), values };
  }
  m = /^([^=!\s]+)\s*(==|!=|=)\s*(\S*)$/.exec(term);
  if (m) return { op: m[2] === '!=' ? 'ne' : 'eq', key: checkKey(m[1]!, selector), value: m[3]! };
  m = /^!\s*(\S+)$/.exec(term);
  if (m) return { op: 'notexists', key: checkKey(m[1]!, selector) };
  if (/^\S+$/.test(term)) return { op: 'exists', key: checkKey(term, selector) };
  throw badSelector('label', selector, `cannot parse term "${term}"`);
}

function checkKey(key: string, selector: string): string {
  if (!KEY.test(key)) throw badSelector('label', selector, `invalid label key "${key}"`);
  return key;
}

export function parseLabelSelector(selector: string | undefined): LabelPredicate {
  if (!selector || selector.trim() === '') return () => true;
  const reqs = splitTerms(selector).map((t) => parseRequirement(t, selector));
  return (labels) =>
    reqs.every((r) => {
      const v = labels?.[r.key];
      switch (r.op) {
        case 'eq': return v === r.value;
        case 'ne': return v !== r.value;
        case 'in': return v !== undefined && r.values.includes(v);
        case 'notin': return v === undefined || !r.values.includes(v);
        case 'exists': return v !== undefined;
        case 'notexists': return v === undefined;
      }
    });
}

/** The fields the API server indexes for our kinds. */
export const SUPPORTED_FIELDS = ['metadata.name', 'metadata.namespace', 'spec.nodeName', 'status.phase'] as const;
export type SupportedField = (typeof SUPPORTED_FIELDS)[number];

/** As the real API: every kind has metadata.*; spec.nodeName and status.phase are Pod fields (and Namespace has status.phase). */
function fieldsFor(kind: string): readonly SupportedField[] {
  if (kind === 'Pod') return SUPPORTED_FIELDS;
  if (kind === 'Namespace') return ['metadata.name', 'metadata.namespace', 'status.phase'];
  return ['metadata.name', 'metadata.namespace'];
}

export type FieldPredicate = (obj: unknown) => boolean;

function fieldValue(obj: unknown, path: readonly string[]): string {
  let cur: unknown = obj;
  for (const part of path) {
    cur = typeof cur === 'object' && cur !== null ? (cur as Record<string, unknown>)[part] : undefined;
  }
  // The API compares a missing field as the empty string (spec.nodeName= selects unscheduled pods).
  return typeof cur === 'string' ? cur : '';
}

export function parseFieldSelector(selector: string | undefined, kind: string): FieldPredicate {
  if (!selector || selector.trim() === '') return () => true;
  const reqs = splitTerms(selector).map((term) => {
    const m = /^([^=!\s]+)\s*(==|!=|=)\s*(\S*)$/.exec(term);
    if (!m) throw badSelector('field', selector, `cannot parse term "${term}" (only =, ==, != are supported)`);
    const field = m[1]!;
    const allowed = fieldsFor(kind);
    if (!(allowed as readonly string[]).includes(field)) {
      throw new KubeApiError(400, 'BadRequest', `field label not supported: ${field} (kind ${kind}; supported: ${allowed.join(', ')})`);
    }
    // The path is split once here: predicates run for every watcher on every event.
    return { path: field.split('.'), ne: m[2] === '!=', value: m[3]! };
  });
  return (obj) => reqs.every((r) => (fieldValue(obj, r.path) === r.value) !== r.ne);
}
