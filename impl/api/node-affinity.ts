/**
 * A pod template's required node affinity (`affinity.nodeAffinity.requiredDuringScheduling
 * IgnoredDuringExecution`, a Kubernetes NodeSelector) evaluated against one node, as the
 * scheduler and the DaemonSet controller read it (k8s.io/component-helpers nodeaffinity):
 *   - the terms are ORed; a term's matchExpressions and matchFields are ANDed; a term with
 *     neither matches no node; a selector with no terms matches no node;
 *   - matchExpressions on labels: In, NotIn (also true when the label is absent), Exists,
 *     DoesNotExist, Gt, Lt (the label and the single value parse as integers; otherwise false);
 *   - matchFields: only `metadata.name`, with In or NotIn.
 * The selector comes from the API as JSON, so it is validated here: a malformed one is a
 * NodeSelectorError naming what is wrong (the installer then cannot decide, and says so).
 */

export interface NodeFacts {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

export class NodeSelectorError extends Error {}

const LABEL_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt'] as const;
type LabelOperator = (typeof LABEL_OPERATORS)[number];

interface Requirement {
  readonly key: string;
  readonly operator: LabelOperator;
  readonly values: readonly string[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function requirement(v: unknown, where: string, fields: boolean): Requirement {
  if (!isRecord(v)) throw new NodeSelectorError(`${where}: expected an object`);
  const { key, operator, values } = v;
  if (typeof key !== 'string' || key === '') throw new NodeSelectorError(`${where}.key: expected a non-empty string`);
  if (typeof operator !== 'string' || !(LABEL_OPERATORS as readonly string[]).includes(operator))
    throw new NodeSelectorError(
      `${where}.operator: expected one of ${LABEL_OPERATORS.join(', ')}, got ${JSON.stringify(operator)}`,
    );
  const list = values ?? [];
  if (!Array.isArray(list) || !list.every((x): x is string => typeof x === 'string'))
    throw new NodeSelectorError(`${where}.values: expected a list of strings`);
  const op = operator as LabelOperator;
  if (fields) {
    if (key !== 'metadata.name') throw new NodeSelectorError(`${where}.key: matchFields supports only metadata.name`);
    if (op !== 'In' && op !== 'NotIn')
      throw new NodeSelectorError(`${where}.operator: matchFields supports only In and NotIn`);
  }
  if ((op === 'In' || op === 'NotIn') && list.length === 0)
    throw new NodeSelectorError(`${where}.values: ${op} needs at least one value`);
  if ((op === 'Exists' || op === 'DoesNotExist') && list.length > 0)
    throw new NodeSelectorError(`${where}.values: ${op} takes no values`);
  if ((op === 'Gt' || op === 'Lt') && (list.length !== 1 || !/^-?\d+$/.test(list[0]!)))
    throw new NodeSelectorError(`${where}.values: ${op} needs exactly one integer value`);
  return { key, operator: op, values: list };
}

function requirementHolds(r: Requirement, value: string | undefined): boolean {
  switch (r.operator) {
    case 'In':
      return value !== undefined && r.values.includes(value);
    case 'NotIn':
      return value === undefined || !r.values.includes(value);
    case 'Exists':
      return value !== undefined;
    case 'DoesNotExist':
      return value === undefined;
    case 'Gt':
    case 'Lt': {
      if (value === undefined || !/^-?\d+$/.test(value)) return false;
      const have = BigInt(value);
      const want = BigInt(r.values[0]!);
      return r.operator === 'Gt' ? have > want : have < want;
    }
  }
}

/** Whether `selector` (a NodeSelector as the API returns it) selects `node`; throws NodeSelectorError when malformed. */
export function nodeSelectorMatches(selector: unknown, node: NodeFacts): boolean {
  if (!isRecord(selector)) throw new NodeSelectorError('nodeSelector: expected an object');
  const terms = selector.nodeSelectorTerms;
  if (!Array.isArray(terms)) throw new NodeSelectorError('nodeSelectorTerms: expected a list');
  // Every term is validated before any is used: a malformed selector is never half-evaluated.
  const parsed = terms.map((t, i) => {
    const where = `nodeSelectorTerms[${i}]`;
    if (!isRecord(t)) throw new NodeSelectorError(`${where}: expected an object`);
    const list = (v: unknown, what: string): unknown[] => {
      if (v === undefined) return [];
      if (!Array.isArray(v)) throw new NodeSelectorError(`${where}.${what}: expected a list`);
      return v;
    };
    return {
      labels: list(t.matchExpressions, 'matchExpressions').map((r, j) =>
        requirement(r, `${where}.matchExpressions[${j}]`, false),
      ),
      fields: list(t.matchFields, 'matchFields').map((r, j) => requirement(r, `${where}.matchFields[${j}]`, true)),
    };
  });
  return parsed.some(
    (t) =>
      t.labels.length + t.fields.length > 0 &&
      t.labels.every((r) => requirementHolds(r, Object.hasOwn(node.labels, r.key) ? node.labels[r.key] : undefined)) &&
      t.fields.every((r) => requirementHolds(r, node.name)),
  );
}

/**
 * The required node affinity of a pod spec (as JSON from the API), or undefined when it sets none
 * (then every node is eligible as far as affinity goes).
 */
export function requiredNodeAffinity(podSpec: unknown): unknown {
  if (!isRecord(podSpec)) return undefined;
  const affinity = podSpec.affinity;
  if (!isRecord(affinity)) return undefined;
  const nodeAffinity = affinity.nodeAffinity;
  if (!isRecord(nodeAffinity)) return undefined;
  return nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution ?? undefined;
}
