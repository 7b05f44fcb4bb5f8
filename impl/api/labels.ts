/**
 * Labels that decide enrollment (as upstream istio-cni). Label values are already constrained by the
 * API server, so the reader here classifies rather than rejects: an unrecognised value is kept
 * apart from "ambient" and "none" so enrollment can apply upstream's selector semantics to it
 * (it does not match `= ambient`, and it does match `NotIn [none]`).
 */

/** On a pod or a namespace: `ambient` enrolls, `none` opts a pod out. */
export const DATAPLANE_MODE = 'istio.io/dataplane-mode';

type DataplaneModeLabel =
  | { readonly kind: 'absent' }
  | { readonly kind: 'ambient' }
  | { readonly kind: 'none' }
  /** Any other value, exactly as written ("Ambient", "", "sidecar"...). */
  | { readonly kind: 'unrecognized'; readonly value: string };

export function readDataplaneMode(labels: Readonly<Record<string, string>> | undefined): DataplaneModeLabel {
  const v = labels?.[DATAPLANE_MODE];
  if (v === undefined) return { kind: 'absent' };
  if (v === 'ambient' || v === 'none') return { kind: v };
  return { kind: 'unrecognized', value: v };
}
