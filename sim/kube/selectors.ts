/**
 * Label and field selectors in the API's string syntax (the `labelSelector` and `fieldSelector`
 * query parameters the API server takes), compiled to predicates. Parse errors are 400
 * BadRequest, as the API server answers. A label selector becomes an impl/api LabelSelector, so
 * it is matched by the one label matcher the agent's enrollment uses too.
 */
import { KubeApiError } from '../../impl/host/kube.js';
import {
  selectorMatches,
  type LabelSelector,
  type LabelSelectorRequirement,
  type Labels,
} from '../../impl/api/label-selector.js';

export type LabelPredicate = (labels: Labels) => boolean;

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

/** One term as a requirement: `k=v` and `k==v` are `k in (v)`, `k!=v` is `k notin (v)`. */
function parseRequirement(term: string, selector: string): LabelSelectorRequirement {
  let m = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
  if (m) {
    const values = m[3]!
      .split(',')
      .map((v) => v.trim())
      .filter((v) => v !== '');
    return { key: checkKey(m[1]!, selector), operator: m[2] === 'in' ? 'In' : 'NotIn', values };
  }
  m = /^([^=!\s]+)\s*(==|!=|=)\s*(\S*)$/.exec(term);
  if (m) return { key: checkKey(m[1]!, selector), operator: m[2] === '!=' ? 'NotIn' : 'In', values: [m[3]!] };
  m = /^!\s*(\S+)$/.exec(term);
  if (m) return { key: checkKey(m[1]!, selector), operator: 'DoesNotExist' };
  if (/^\S+$/.test(term)) return { key: checkKey(term, selector), operator: 'Exists' };
  throw badSelector('label', selector, `cannot parse term "${term}"`);
}

function checkKey(key: string, selector: string): string {
  if (!KEY.test(key)) throw badSelector('label', selector, `invalid label key "${key}"`);
  return key;
}

export function parseLabelSelector(selector: string | undefined): LabelPredicate {
  if (!selector || selector.trim() === '') return () => true;
  const sel: LabelSelector = { matchExpressions: splitTerms(selector).map((t) => parseRequirement(t, selector)) };
  return (labels) => selectorMatches(sel, labels);
}

/** The fields the API server indexes for our kinds. */
const SUPPORTED_FIELDS = ['metadata.name', 'metadata.namespace', 'spec.nodeName', 'status.phase'] as const;
type SupportedField = (typeof SUPPORTED_FIELDS)[number];

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
      throw new KubeApiError(
        400,
        'BadRequest',
        `field label not supported: ${field} (kind ${kind}; supported: ${allowed.join(', ')})`,
      );
    }
    // The path is split once here: predicates run for every watcher on every event.
    return { path: field.split('.'), ne: m[2] === '!=', value: m[3]! };
  });
  return (obj) => reqs.every((r) => (fieldValue(obj, r.path) === r.value) !== r.ne);
}
