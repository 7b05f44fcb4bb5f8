/**
 * Object validation for the sim API server. Schemas come from maintained packages —
 * kubernetes-models (core, apps and apiextensions, OpenAPI-generated) and @kubernetes-models/istio
 * (security.istio.io/v1 from Istio's CRDs) — so a field of the wrong type or a missing required
 * field fails here as it would in a real API server. On top: the metadata rules the API server
 * enforces itself (names, namespace, immutability of what we rely on).
 */
import { Pod } from 'kubernetes-models/v1/Pod';
import { PodSpec } from 'kubernetes-models/v1/PodSpec';
import { PodStatus } from 'kubernetes-models/v1/PodStatus';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Node } from 'kubernetes-models/v1/Node';
import { Event } from 'kubernetes-models/v1/Event';
import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { AuthorizationPolicy } from '@kubernetes-models/istio/security.istio.io/v1/AuthorizationPolicy';
import { KubeApiError, type KubeKind } from '../../impl/host/kube.js';

interface Validatable {
  validate(): void;
}
// The model constructors take their own typed data; we validate JSON of unknown shape, which is
// exactly what their validate() is for, so the data is passed through as their parameter type.
type ModelCtor = new (data: never) => Validatable;

const MODELS: Record<KubeKind, ModelCtor> = {
  Pod: Pod as unknown as ModelCtor,
  Namespace: Namespace as unknown as ModelCtor,
  ServiceAccount: ServiceAccount as unknown as ModelCtor,
  Node: Node as unknown as ModelCtor,
  Event: Event as unknown as ModelCtor,
  CustomResourceDefinition: CustomResourceDefinition as unknown as ModelCtor,
  AuthorizationPolicy: AuthorizationPolicy as unknown as ModelCtor,
  DaemonSet: DaemonSet as unknown as ModelCtor,
};

/**
 * The validators the Pod schema itself runs on spec and status (the same generated modules), for
 * validating only what a write changed; see validateWrite.
 */
const POD_FIELD_MODELS: Readonly<Record<string, ModelCtor>> = {
  spec: PodSpec as unknown as ModelCtor,
  status: PodStatus as unknown as ModelCtor,
};

export interface FieldError {
  readonly field: string;
  readonly message: string;
}

export function invalid(kind: string, name: string, errors: readonly FieldError[]): KubeApiError {
  const detail = errors.map((e) => `${e.field}: ${e.message}`).join(', ');
  return new KubeApiError(422, 'Invalid', `${kind} "${name}" is invalid: ${detail}`);
}

/** "/spec/containers/0/name" → "spec.containers[0].name" (the API server's field path style). */
function fieldPath(instancePath: string): string {
  return (
    instancePath
      .split('/')
      .filter((p) => p !== '')
      .map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`))
      .join('') || '<root>'
  );
}

interface AjvError {
  instancePath?: string;
  message?: string;
  params?: Record<string, unknown>;
}

/**
 * Schema validation of a whole object; throws 422 Invalid listing every failing field.
 *
 * The common case (valid) runs the model's compiled validator on a shallow view of the object —
 * an object with the model's prototype and the object's own top-level fields — instead of
 * constructing the model, which deep-copies the object. The validators only read their input.
 * Only when that check fails is the object validated the full way (the model constructor drops
 * undefined values first), so verdicts and error lists are the model's own.
 */
export function validateSchema(kind: KubeKind, name: string, obj: unknown): void {
  const Model = MODELS[kind];
  if (typeof obj === 'object' && obj !== null && !Array.isArray(obj)) {
    const view = Object.assign(Object.create(Model.prototype) as Validatable, obj);
    try {
      view.validate();
      return;
    } catch {
      // fall through to the full validation, which decides and reports
    }
  }
  try {
    new Model(structuredClone(obj) as never).validate();
  } catch (e) {
    const errs = (e as { errors?: AjvError[] }).errors;
    if (!Array.isArray(errs)) throw e;
    throw invalid(
      kind,
      name,
      errs.map((x) => {
        const missing =
          typeof x.params?.['missingProperty'] === 'string' ? `.${String(x.params['missingProperty'])}` : '';
        return {
          field: fieldPath(x.instancePath ?? '') + missing,
          message: missing ? 'Required value' : (x.message ?? 'invalid'),
        };
      }),
    );
  }
}

function passes(Model: ModelCtor, obj: object): boolean {
  const view = Object.assign(Object.create(Model.prototype) as Validatable, obj);
  try {
    view.validate();
    return true;
  } catch {
    return false;
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Validation of an update of `old` (stored, so valid, and frozen) to `next`: the same verdict as
 * validateSchema(next). For Pods — the kind written on every pod start — a field `next` shares
 * with `old` (the same frozen object) is not validated again: the Pod schema is apiVersion and
 * kind (which the store copies from old), metadata, spec and status, each checked on its own, so
 * a status patch checks the new status against the PodStatus schema. Metadata counts as
 * unchanged when every value is the old one but resourceVersion (a string the store sets).
 * Anything else, and any failure, goes to validateSchema, which decides and reports.
 */
export function validateWrite(
  kind: KubeKind,
  name: string,
  next: Record<string, unknown>,
  old: Record<string, unknown>,
): void {
  if (kind === 'Pod' && next['apiVersion'] === old['apiVersion'] && next['kind'] === old['kind']) {
    let ok = true;
    for (const key of Object.keys(next)) {
      const v = next[key];
      if (v === old[key] || key === 'apiVersion' || key === 'kind') continue;
      if (
        key === 'metadata' &&
        isPlainObject(v) &&
        isPlainObject(old[key]) &&
        sameButVersion(v, old[key] as Record<string, unknown>)
      )
        continue;
      const Model = POD_FIELD_MODELS[key];
      if (v === null || v === undefined) continue; // both are accepted for spec and status by the Pod schema
      if (!Model || !isPlainObject(v) || !passes(Model, v)) {
        ok = false;
        break;
      }
    }
    if (ok) return;
  }
  validateSchema(kind, name, next);
}

function sameButVersion(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  for (const k of Object.keys(a))
    if (a[k] !== b[k] && !(k === 'resourceVersion' && typeof a[k] === 'string')) return false;
  for (const k of Object.keys(b)) if (!(k in a) && b[k] !== undefined) return false;
  return true;
}

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Names: namespaces are DNS-1123 labels (63), everything else DNS-1123 subdomains (253). */
export function nameErrors(kind: KubeKind, name: string): FieldError[] {
  if (name === '') return [{ field: 'metadata.name', message: 'Required value: name or generateName is required' }];
  const label = kind === 'Namespace';
  const ok = label ? DNS1123_LABEL.test(name) && name.length <= 63 : DNS1123_SUBDOMAIN.test(name) && name.length <= 253;
  if (ok) return [];
  return [
    {
      field: 'metadata.name',
      message: `Invalid value: "${name}": a lowercase RFC 1123 ${label ? 'label (max 63 characters)' : 'subdomain (max 253 characters)'} must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
    },
  ];
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

export function labelErrors(labels: Record<string, unknown> | undefined): FieldError[] {
  const out: FieldError[] = [];
  for (const [k, v] of Object.entries(labels ?? {})) {
    if (typeof v !== 'string' || v.length > 63 || !LABEL_VALUE.test(v)) {
      out.push({
        field: `metadata.labels.${k}`,
        message: `Invalid value: ${JSON.stringify(v)}: a valid label must be 63 characters or less, alphanumeric, '-', '_' or '.'`,
      });
    }
  }
  return out;
}
