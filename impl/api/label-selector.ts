/**
 * Kubernetes label selectors (metav1.LabelSelector): matchLabels AND matchExpressions, where an
 * empty selector matches everything. Semantics as apimachinery's: `NotIn` and `DoesNotExist`
 * match when the key is absent; `In` and `Exists` need it. Validated once, evaluated often.
 */
type SelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface LabelSelectorRequirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  readonly values?: readonly string[];
}

export interface LabelSelector {
  readonly matchLabels?: Readonly<Record<string, string>>;
  readonly matchExpressions?: readonly LabelSelectorRequirement[];
}

export type Labels = Readonly<Record<string, string>> | undefined;

export class SelectorError extends Error {}

const KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

/** Check a selector from configuration; throws SelectorError naming the offending part. */
export function validateSelector(sel: LabelSelector, where: string): void {
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) {
    if (!KEY.test(k)) throw new SelectorError(`${where}: invalid label key ${JSON.stringify(k)}`);
    if (typeof v !== 'string' || !VALUE.test(v))
      throw new SelectorError(`${where}: invalid value ${JSON.stringify(v)} for label ${k}`);
  }
  (sel.matchExpressions ?? []).forEach((r, i) => {
    const at = `${where}.matchExpressions[${i}]`;
    if (!KEY.test(r.key)) throw new SelectorError(`${at}: invalid label key ${JSON.stringify(r.key)}`);
    if (!['In', 'NotIn', 'Exists', 'DoesNotExist'].includes(r.operator)) {
      throw new SelectorError(
        `${at}: unknown operator ${JSON.stringify(r.operator)}; expected In, NotIn, Exists or DoesNotExist`,
      );
    }
    const needsValues = r.operator === 'In' || r.operator === 'NotIn';
    if (needsValues && (!r.values || r.values.length === 0))
      throw new SelectorError(`${at}: operator ${r.operator} needs a non-empty values list`);
    if (!needsValues && r.values && r.values.length > 0)
      throw new SelectorError(`${at}: operator ${r.operator} takes no values`);
    for (const v of r.values ?? [])
      if (!VALUE.test(v)) throw new SelectorError(`${at}: invalid value ${JSON.stringify(v)}`);
  });
}

export function selectorMatches(sel: LabelSelector | undefined, labels: Labels): boolean {
  if (!sel) return true;
  const l = labels ?? {};
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (l[k] !== v) return false;
  for (const r of sel.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(l, r.key);
    const val = l[r.key];
    switch (r.operator) {
      case 'In':
        if (!has || !r.values!.includes(val!)) return false;
        break;
      case 'NotIn':
        if (has && r.values!.includes(val!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
    }
  }
  return true;
}
