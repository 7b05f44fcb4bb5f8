/**
 * The message the CNI plugin sends the node agent for a pod sandbox, and the agent's reply.
 * Carried as JSON (HTTP over a Unix socket on Linux, in memory in the sim). Everything is
 * validated strictly on receipt: the body comes from another process and reaches rule
 * application and namespace handling.
 */
import { DNS1123_LABEL, DNS1123_SUBDOMAIN } from './dns-names.js';

type PluginEventKind = 'add' | 'check';

export interface PluginEvent {
  readonly kind: PluginEventKind;
  /** Path of the pod's network namespace as the runtime gave it (CNI_NETNS). */
  readonly netns: string;
  readonly podName: string;
  readonly podNamespace: string;
  /** K8S_POD_UID from CNI_ARGS, when the runtime passes it. */
  readonly podUid: string | undefined;
  readonly containerId: string;
  /** Pod addresses from the primary plugin's result (no prefix length). */
  readonly ips: readonly string[];
}

export type PluginEventReply =
  | { readonly ok: true; readonly status: 'enabled' }
  | { readonly ok: false; readonly error: string; readonly retryable: boolean };

export const PLUGIN_EVENT_MAX_BYTES = 16 * 1024;
const MAX_IPS = 8;

export class PluginEventError extends Error {}

const CONTAINER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,255}$/;
const UID = /^[A-Za-z0-9][A-Za-z0-9-]{0,127}$/;
const NETNS_PATH = /^\/[A-Za-z0-9_.:/-]{1,4095}$/;
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const IPV6 = /^[0-9a-fA-F:.]{2,45}$/;

function field(o: Record<string, unknown>, key: string, re: RegExp, what: string): string {
  const v = o[key];
  if (typeof v !== 'string') throw new PluginEventError(`plugin event: ${key} must be a string (${what})`);
  if (!re.test(v))
    throw new PluginEventError(`plugin event: invalid ${key} ${JSON.stringify(v.slice(0, 80))}: expected ${what}`);
  return v;
}

/** Parse and validate a plugin event body; throws PluginEventError saying what is wrong. */
export function parsePluginEvent(body: string): PluginEvent {
  if (body.length > PLUGIN_EVENT_MAX_BYTES)
    throw new PluginEventError(
      `plugin event: body of ${body.length} bytes exceeds the ${PLUGIN_EVENT_MAX_BYTES}-byte limit`,
    );
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (e) {
    throw new PluginEventError(`plugin event: body is not JSON (${(e as Error).message})`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new PluginEventError('plugin event: body must be a JSON object');
  const o = raw as Record<string, unknown>;
  const known = ['kind', 'netns', 'podName', 'podNamespace', 'podUid', 'containerId', 'ips'];
  for (const k of Object.keys(o))
    if (!known.includes(k)) throw new PluginEventError(`plugin event: unknown field ${JSON.stringify(k.slice(0, 40))}`);
  if (o['kind'] !== 'add' && o['kind'] !== 'check')
    throw new PluginEventError('plugin event: kind must be "add" or "check"');
  const netns = field(o, 'netns', NETNS_PATH, 'an absolute path of [A-Za-z0-9_.:/-]');
  if (netns.split('/').includes('..')) throw new PluginEventError('plugin event: netns path must not contain ".."');
  const podName = field(o, 'podName', DNS1123_SUBDOMAIN, 'a DNS-1123 subdomain');
  const podNamespace = field(o, 'podNamespace', DNS1123_LABEL, 'a DNS-1123 label');
  const podUid = o['podUid'] === undefined ? undefined : field(o, 'podUid', UID, 'a pod UID');
  const containerId = field(o, 'containerId', CONTAINER_ID, 'a container id of [A-Za-z0-9_.-]');
  const ipsRaw = o['ips'];
  if (!Array.isArray(ipsRaw) || ipsRaw.length > MAX_IPS)
    throw new PluginEventError(`plugin event: ips must be a list of at most ${MAX_IPS} addresses`);
  const ips = ipsRaw.map((ip, i) => {
    if (typeof ip !== 'string' || !(IPV4.test(ip) || (ip.includes(':') && IPV6.test(ip)))) {
      throw new PluginEventError(`plugin event: ips[${i}] is not an IP address`);
    }
    return ip;
  });
  return { kind: o['kind'], netns, podName, podNamespace, podUid, containerId, ips };
}

export function parsePluginEventReply(body: string): PluginEventReply {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    throw new PluginEventError(`node agent reply is not JSON: ${JSON.stringify(body.slice(0, 120))}`);
  }
  const o = raw as Record<string, unknown>;
  if (o && o['ok'] === true && o['status'] === 'enabled') return { ok: true, status: 'enabled' };
  if (o && o['ok'] === false && typeof o['error'] === 'string')
    return { ok: false, error: o['error'].slice(0, 2000), retryable: o['retryable'] === true };
  throw new PluginEventError(`node agent reply has an unexpected shape: ${JSON.stringify(body.slice(0, 120))}`);
}
