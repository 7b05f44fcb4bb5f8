/**
 * Pod annotations the node agent reads or writes, and the two readers of the ones whose values
 * shape rules (docs/design.md, "Pod annotations"):
 * - strict (profile `strict`): a value that is not exactly what the vocabulary allows is an error
 *   naming the annotation and the (escaped, truncated) value; it is never guessed at ("True",
 *   " true", "yes" are errors, not booleans);
 * - upstream (profile `upstream`): istio-cni's reading — booleans as Go's strconv.ParseBool, a
 *   value it cannot parse ignored (the setting's default applies), interface lists split on
 *   commas with spaces trimmed and empty items dropped. One step is ours: an interface name
 *   that is not safe in rule text is ignored too (upstream hands it to iptables).
 * Under both, nothing reaches rule text unvalidated.
 */
import type { Brand } from './brand.js';

/** Ingress mode: "true" drops inbound capture (gateways), outbound stays captured. */
export const BYPASS_INBOUND_CAPTURE = 'ambient.istio.io/bypass-inbound-capture';
/** Per-pod DNS capture override, "true" or "false"; absent = the global setting. */
export const DNS_CAPTURE = 'ambient.istio.io/dns-capture';
/** Comma-separated interface names whose inbound TCP is treated as outbound (redirected to 15001). */
export const REROUTE_VIRTUAL_INTERFACES = 'istio.io/reroute-virtual-interfaces';
/** Status written by the node agent via pods/status: `pending` or `enabled`; absent = not enrolled. */
export const REDIRECTION_STATUS = 'ambient.istio.io/redirection';
/** Present on sidecar-injected pods, which ambient never enrolls. */
export const SIDECAR_STATUS = 'sidecar.istio.io/status';

type RedirectionStatus = 'pending' | 'enabled';

/** A pod annotation's value was rejected; `annotation` and `value` say which and what. */
export class AnnotationError extends Error {
  constructor(
    readonly annotation: string,
    readonly value: string,
    detail: string,
  ) {
    super(`invalid value ${quote(value)} for pod annotation ${annotation}: ${detail}`);
    this.name = 'AnnotationError';
  }
}

/** JSON-escaped (newlines, control and non-ASCII characters visible) and cut to 80 characters. */
function quote(value: string): string {
  const cut = value.length > 80 ? `${value.slice(0, 80)}…(${value.length} chars)` : value;
  return JSON.stringify(cut).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Exactly "true" or "false"; absent → undefined (the caller's default applies). */
function parseBooleanAnnotation(annotation: string, value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new AnnotationError(annotation, value, 'expected exactly "true" or "false"');
}

/** A network interface name that is safe to put in rule text as `-i NAME`. */
export type InterfaceName = Brand<string, 'InterfaceName'>;

/**
 * Kernel rules (dev_valid_name: 1..15 bytes, not "." or "..", no '/', ':' or whitespace)
 * narrowed to a safe set: ASCII letters, digits, '_', '.', '-', first character a letter or
 * digit (so never an option like `-j`), and no '+' (an iptables wildcard) or '!' (negation).
 */
const IFACE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$/;

/** Why `name` is not an interface name, or undefined when it is one. */
export function interfaceNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'an interface name is empty';
  if (name.length > 15)
    return `interface name ${quote(name)} is ${name.length} characters; the kernel allows at most 15`;
  if (IFACE.test(name)) return undefined;
  const bad = [...name].find((c) => !/[A-Za-z0-9_.-]/.test(c));
  if (bad !== undefined)
    return `interface name ${quote(name)} contains ${quote(bad)}; allowed are letters, digits, '_', '.' and '-'`;
  return `interface name ${quote(name)} must start with a letter or digit`;
}

export function interfaceName(name: string): InterfaceName {
  const p = interfaceNameProblem(name);
  if (p) throw new Error(`invalid interface name: ${p}`);
  return name as InterfaceName;
}

/** At most this many virtual interfaces per pod (each costs two rules in the pod's nat table). */
const MAX_VIRTUAL_INTERFACES = 16;

/** `tun0,tun1` → [tun0, tun1]. No spaces, no empty items, no duplicates; absent → []. */
function parseVirtualInterfaces(value: string | undefined): InterfaceName[] {
  if (value === undefined) return [];
  const fail = (detail: string): never => {
    throw new AnnotationError(
      REROUTE_VIRTUAL_INTERFACES,
      value,
      `${detail}; expected comma-separated interface names without spaces, e.g. "tun0,tun1"`,
    );
  };
  if (value.length > MAX_VIRTUAL_INTERFACES * 16) fail(`the value is ${value.length} characters long`);
  const items = value.split(',');
  if (items.length > MAX_VIRTUAL_INTERFACES)
    fail(`${items.length} interfaces listed; at most ${MAX_VIRTUAL_INTERFACES} are allowed`);
  const seen = new Set<string>();
  const out: InterfaceName[] = [];
  for (const item of items) {
    const p = interfaceNameProblem(item);
    if (p) fail(item === '' ? 'an item in the list is empty' : p);
    if (item === 'lo') fail('"lo" cannot be a virtual interface (loopback is never rerouted)');
    if (seen.has(item)) fail(`interface ${quote(item)} is listed twice`);
    seen.add(item);
    out.push(item as InterfaceName);
  }
  return out;
}

export function parseRedirectionStatus(value: string | undefined): RedirectionStatus | undefined {
  if (value === undefined) return undefined;
  if (value === 'pending' || value === 'enabled') return value;
  throw new AnnotationError(
    REDIRECTION_STATUS,
    value,
    'expected "pending" or "enabled" (the node agent writes it; users should not)',
  );
}

/** The per-pod rule-shaping annotations, validated together; the first bad one throws (strict). */
export interface PodRedirectionAnnotations {
  readonly bypassInboundCapture: boolean;
  /** undefined = follow the global DNS capture setting. */
  readonly dnsCapture: boolean | undefined;
  readonly virtualInterfaces: readonly InterfaceName[];
}

export function parsePodRedirectionAnnotations(
  annotations: Readonly<Record<string, string>> | undefined,
): PodRedirectionAnnotations {
  const a = annotations ?? {};
  return {
    bypassInboundCapture: parseBooleanAnnotation(BYPASS_INBOUND_CAPTURE, a[BYPASS_INBOUND_CAPTURE]) ?? false,
    dnsCapture: parseBooleanAnnotation(DNS_CAPTURE, a[DNS_CAPTURE]),
    virtualInterfaces: parseVirtualInterfaces(a[REROUTE_VIRTUAL_INTERFACES]),
  };
}

// ---------------------------------------------------------------- upstream's reading

/**
 * Go's strconv.ParseBool, which upstream's CheckBooleanAnnotation uses: "1", "t", "T", "TRUE",
 * "true", "True" and their false counterparts; anything else (" true", "yes", "") is not a boolean.
 */
export function parseGoBool(value: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  return undefined;
}

/** Go's unicode.IsSpace (what strings.TrimSpace trims); String.prototype.trim differs (U+FEFF, U+0085). */
const GO_SPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$/;

function goTrimSpace(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && GO_SPACE.test(s[a]!)) a++;
  while (b > a && GO_SPACE.test(s[b - 1]!)) b--;
  return s.slice(a, b);
}

/**
 * What upstream's getPodLevelTrafficOverrides (cni/pkg/nodeagent/net.go) reads, value for value:
 * ingress mode and DNS capture as CheckBooleanAnnotation reads them (an unparsable value counts as
 * absent), the interface list split on ',' with each item space-trimmed and empty ones dropped.
 * The names are NOT validated here, as upstream; parsePodRedirectionAnnotationsUpstream does that.
 */
interface UpstreamPodOverrides {
  readonly ingressMode: boolean;
  /** undefined = unset (the global setting applies). */
  readonly dnsCapture: boolean | undefined;
  readonly virtualInterfaces: readonly string[];
}

export function upstreamPodOverrides(annotations: Readonly<Record<string, string>> | undefined): UpstreamPodOverrides {
  const a = annotations ?? {};
  const bool = (name: string): boolean | undefined => (a[name] === undefined ? undefined : parseGoBool(a[name]!));
  const virt = a[REROUTE_VIRTUAL_INTERFACES];
  return {
    ingressMode: bool(BYPASS_INBOUND_CAPTURE) ?? false,
    dnsCapture: bool(DNS_CAPTURE),
    virtualInterfaces:
      virt === undefined
        ? []
        : virt
            .split(',')
            .map(goTrimSpace)
            .filter((s) => s !== ''),
  };
}

/** A value the upstream reading ignored, and why (the agent says so in a Warning Event). */
interface IgnoredAnnotationValue {
  readonly annotation: string;
  /** The value as shown in messages: JSON-escaped, cut to 80 characters. */
  readonly shown: string;
  readonly why: string;
}

/**
 * The upstream profile's reading: upstreamPodOverrides, then every interface name checked
 * against the safe set (interfaceNameProblem) before it may reach rule text. A name that fails
 * is ignored — its TCP is then captured as inbound, the fail-safe side — where upstream would
 * hand it to iptables (which rejects names over 15 characters, failing the pod's ADD, and
 * accepts the rest). A name listed twice is one name (two identical rules behave as one).
 * Never throws.
 */
export function parsePodRedirectionAnnotationsUpstream(annotations: Readonly<Record<string, string>> | undefined): {
  readonly annotations: PodRedirectionAnnotations;
  readonly ignored: readonly IgnoredAnnotationValue[];
} {
  const a = annotations ?? {};
  const o = upstreamPodOverrides(a);
  const ignored: IgnoredAnnotationValue[] = [];
  for (const name of [BYPASS_INBOUND_CAPTURE, DNS_CAPTURE]) {
    const v = a[name];
    if (v !== undefined && parseGoBool(v) === undefined)
      ignored.push({
        annotation: name,
        shown: quote(v),
        why: 'not a boolean (strconv.ParseBool); ignored, as upstream',
      });
  }
  const names: InterfaceName[] = [];
  for (const item of o.virtualInterfaces) {
    const p = interfaceNameProblem(item);
    if (p !== undefined) {
      ignored.push({
        annotation: REROUTE_VIRTUAL_INTERFACES,
        shown: quote(item),
        why: `${p}; this interface is ignored (its TCP is captured as inbound)`,
      });
    } else if (!names.includes(item as InterfaceName)) {
      names.push(item as InterfaceName);
    }
  }
  return {
    annotations: { bypassInboundCapture: o.ingressMode, dnsCapture: o.dnsCapture, virtualInterfaces: names },
    ignored,
  };
}
