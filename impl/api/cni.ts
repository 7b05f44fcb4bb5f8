/**
 * The CNI vocabulary (containernetworking/cni SPEC.md, 1.0.0 with the 1.1.0 additions we can
 * name): network configuration lists, the per-plugin configuration a runtime pipes to a plugin,
 * the environment of the exec protocol, results, the error JSON and its codes.
 *
 * One source for every side: the sim runtime and the netns invoker (which play the container
 * runtime), the sim primary plugins, and our own CNI plugin. No I/O here — parsers take text or
 * parsed JSON and either return typed values or throw a CniError whose code is the one the spec
 * assigns to that failure (4 bad environment, 6 undecodable, 7 invalid configuration, ...).
 */
import { isIpAddress } from './ip/address.js';
import { isCidr } from './ip/prefix.js';

/** Spec versions a configuration or result may carry. */
const CNI_SPEC_VERSIONS = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;

export type CniCommand = 'ADD' | 'DEL' | 'CHECK' | 'VERSION' | 'STATUS' | 'GC';
const CNI_COMMANDS: readonly CniCommand[] = ['ADD', 'DEL', 'CHECK', 'VERSION', 'STATUS', 'GC'];

/** Well-known error codes (spec "Error"): 0-99 reserved, 100+ plugin-specific. */
export const CniErrorCode = {
  IncompatibleVersion: 1,
  UnsupportedField: 2,
  UnknownContainer: 3,
  InvalidEnvironment: 4,
  IoFailure: 5,
  DecodeFailure: 6,
  InvalidNetworkConfig: 7,
  TryAgainLater: 11,
  PluginNotAvailable: 50,
  PluginNotAvailableLimited: 51,
} as const;

/** The error JSON a plugin prints on stdout when it exits non-zero. */
interface CniErrorJson {
  cniVersion: string;
  code: number;
  msg: string;
  details?: string;
}

/** A CNI failure, on either side of the exec protocol; `toJson()` is what goes on stdout. */
export class CniError extends Error {
  override readonly name = 'CniError';
  constructor(
    readonly code: number,
    readonly msg: string,
    readonly details?: string,
  ) {
    super(details ? `${msg}: ${details}` : msg);
  }

  toJson(cniVersion: string): CniErrorJson {
    return { cniVersion, code: this.code, msg: this.msg, ...(this.details ? { details: this.details } : {}) };
  }
}

interface CniIpam {
  type: string;
  [key: string]: unknown;
}

export interface CniDns {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

/**
 * One plugin in a configuration list. Unknown keys are kept and passed through unchanged, as the
 * spec requires of runtimes.
 */
export interface CniPluginConf {
  type: string;
  capabilities?: Record<string, boolean>;
  ipam?: CniIpam;
  dns?: CniDns;
  [key: string]: unknown;
}

export interface CniConfList {
  cniVersion: string;
  cniVersions?: string[];
  name: string;
  disableCheck?: boolean;
  disableGC?: boolean;
  plugins: CniPluginConf[];
}

/** What a plugin reads on stdin: its list entry plus what the runtime injects. */
export interface CniNetConf extends CniPluginConf {
  cniVersion: string;
  name: string;
  runtimeConfig?: Record<string, unknown>;
  prevResult?: CniResult;
}

export interface CniInterface {
  name: string;
  mac?: string;
  mtu?: number;
  /** The netns path for an interface inside the container; absent for host-side interfaces. */
  sandbox?: string;
  socketPath?: string;
  pciID?: string;
}

interface CniIpConfig {
  /** CIDR: the address and its prefix length, e.g. 10.244.1.5/24. */
  address: string;
  gateway?: string;
  /** Index into `interfaces`. */
  interface?: number;
}

export interface CniRoute {
  dst: string;
  gw?: string;
  mtu?: number;
  advmss?: number;
  priority?: number;
  table?: number;
  scope?: number;
}

/** Result (spec 1.0.0 shape; older plugins may omit interfaces). */
export interface CniResult {
  cniVersion: string;
  interfaces?: CniInterface[];
  ips?: CniIpConfig[];
  routes?: CniRoute[];
  dns?: CniDns;
}

export interface CniVersionResult {
  cniVersion: string;
  supportedVersions: string[];
}

/** The exec protocol's environment, parsed. */
export interface CniEnv {
  readonly command: CniCommand;
  readonly containerId: string | undefined;
  readonly netns: string | undefined;
  readonly ifname: string | undefined;
  /** CNI_ARGS pairs in order (`K=V;K2=V2`). */
  readonly args: ReadonlyArray<readonly [string, string]>;
  /** CNI_PATH directories in order. */
  readonly path: readonly string[];
}

/** What the runtime hands a plugin: environment and stdin. */
export interface CniExecRequest {
  readonly env: Readonly<Record<string, string>>;
  readonly stdin: string;
}

/** What a plugin hands back: exit code and stdout (stderr is only for logs). */
export interface CniExecOutput {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

// ------------------------------------------------------------------------------------ checks

const NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
const CONTAINER_ID = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
const PLUGIN_TYPE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
const IFNAME_BAD = /[/:\s]/;

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** Compare dotted versions: negative when a < b. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

function fail(code: number, msg: string, details?: string): never {
  throw new CniError(code, msg, details);
}

function checkVersionField(v: unknown, where: string): string {
  if (typeof v !== 'string' || v === '')
    fail(CniErrorCode.InvalidNetworkConfig, `${where}: cniVersion is required`, 'set e.g. "cniVersion": "1.0.0"');
  if (!/^\d+\.\d+\.\d+$/.test(v))
    fail(
      CniErrorCode.InvalidNetworkConfig,
      `${where}: invalid cniVersion ${JSON.stringify(v)}`,
      'expected MAJOR.MINOR.PATCH, e.g. 1.0.0',
    );
  return v;
}

/** Validate the name of a network (list): alphanumeric start, then alphanumerics, `_`, `.`, `-`. */
function checkNetworkName(name: unknown, where = 'network configuration'): string {
  if (typeof name !== 'string' || name === '') fail(CniErrorCode.InvalidNetworkConfig, `${where}: name is required`);
  if (!NAME.test(name)) {
    fail(
      CniErrorCode.InvalidNetworkConfig,
      `${where}: invalid name ${JSON.stringify(name)}`,
      'must start with a letter or digit, then letters, digits, "_", "." or "-"',
    );
  }
  return name;
}

function checkPluginConf(p: unknown, i: number, listName: string): CniPluginConf {
  const where = `network ${listName}: plugins[${i}]`;
  if (!isObject(p)) fail(CniErrorCode.InvalidNetworkConfig, `${where} is not an object`);
  const type = p['type'];
  if (typeof type !== 'string' || type === '')
    fail(
      CniErrorCode.InvalidNetworkConfig,
      `${where}: type is required`,
      'the name of the plugin binary, e.g. "bridge"',
    );
  if (!PLUGIN_TYPE.test(type))
    fail(
      CniErrorCode.InvalidNetworkConfig,
      `${where}: invalid type ${JSON.stringify(type)}`,
      'a binary name: no "/" or spaces',
    );
  const caps = p['capabilities'];
  if (caps !== undefined && (!isObject(caps) || !Object.values(caps).every((v) => typeof v === 'boolean'))) {
    fail(CniErrorCode.InvalidNetworkConfig, `${where}: capabilities must map capability names to booleans`);
  }
  const ipam = p['ipam'];
  if (ipam !== undefined && (!isObject(ipam) || typeof ipam['type'] !== 'string' || !PLUGIN_TYPE.test(ipam['type']))) {
    fail(CniErrorCode.InvalidNetworkConfig, `${where}: ipam must be an object with a plugin "type"`);
  }
  return p as CniPluginConf;
}

/**
 * Parse a configuration list (`*.conflist` text or its parsed JSON). Throws CniError 6 when the
 * text is not JSON, 7 when it is not a valid list.
 */
export function parseConfList(input: string | unknown): CniConfList {
  let raw: unknown = input;
  if (typeof input === 'string') {
    try {
      raw = JSON.parse(input);
    } catch (e) {
      fail(
        CniErrorCode.DecodeFailure,
        'network configuration list is not JSON',
        e instanceof Error ? e.message : String(e),
      );
    }
  }
  if (!isObject(raw)) fail(CniErrorCode.InvalidNetworkConfig, 'network configuration list is not a JSON object');
  const name = checkNetworkName(raw['name'], 'network configuration list');
  const cniVersion = checkVersionField(raw['cniVersion'], `network ${name}`);
  const versions = raw['cniVersions'];
  if (
    versions !== undefined &&
    (!Array.isArray(versions) || !versions.every((v) => typeof v === 'string' && /^\d+\.\d+\.\d+$/.test(v)))
  ) {
    fail(CniErrorCode.InvalidNetworkConfig, `network ${name}: cniVersions must be a list of versions`);
  }
  for (const k of ['disableCheck', 'disableGC'] as const) {
    if (raw[k] !== undefined && typeof raw[k] !== 'boolean')
      fail(CniErrorCode.InvalidNetworkConfig, `network ${name}: ${k} must be a boolean`);
  }
  const plugins = raw['plugins'];
  if (!Array.isArray(plugins)) {
    fail(
      CniErrorCode.InvalidNetworkConfig,
      `network ${name}: plugins must be a list`,
      'single-plugin configurations (no "plugins") were removed in spec 1.0.0',
    );
  }
  if (plugins.length === 0) fail(CniErrorCode.InvalidNetworkConfig, `network ${name}: plugins is empty`);
  const checked = plugins.map((p, i) => checkPluginConf(p, i, name));
  return { ...(raw as object), name, cniVersion, plugins: checked } as CniConfList;
}

/**
 * The version a runtime uses for a list: the highest of `cniVersions` it supports, else
 * `cniVersion` (spec 1.1.0 "cniVersions").
 */
export function effectiveVersion(list: CniConfList, supported: readonly string[] = CNI_SPEC_VERSIONS): string {
  const candidates = (list.cniVersions ?? []).filter((v) => supported.includes(v)).sort(compareVersions);
  return candidates[candidates.length - 1] ?? list.cniVersion;
}

/**
 * The configuration the runtime writes on a plugin's stdin (spec "Deriving execution
 * configuration"): the list entry with cniVersion and name injected, capabilities replaced by
 * runtimeConfig (the requested capabilities the runtime has values for), and prevResult.
 */
export function pluginNetConf(
  list: CniConfList,
  index: number,
  opts: { prevResult?: CniResult; capabilityArgs?: Readonly<Record<string, unknown>> } = {},
): CniNetConf {
  const entry = list.plugins[index];
  if (!entry)
    throw new Error(`pluginNetConf: network ${list.name} has no plugin ${index} (it has ${list.plugins.length})`);
  const { capabilities, ...rest } = entry;
  const conf: CniNetConf = { ...rest, cniVersion: effectiveVersion(list), name: list.name };
  const runtimeConfig: Record<string, unknown> = {};
  for (const [cap, on] of Object.entries(capabilities ?? {})) {
    if (on && opts.capabilityArgs && cap in opts.capabilityArgs) runtimeConfig[cap] = opts.capabilityArgs[cap];
  }
  if (Object.keys(runtimeConfig).length > 0) conf.runtimeConfig = runtimeConfig;
  else delete conf.runtimeConfig;
  if (opts.prevResult) conf.prevResult = opts.prevResult;
  else delete conf.prevResult;
  return conf;
}

/**
 * Parse what a plugin reads on stdin (the derived configuration), or check it when given as a
 * value (an in-process call without the text). Throws CniError 6 or 7.
 */
export function parseNetConf(stdin: string | unknown): CniNetConf {
  let raw: unknown = stdin;
  if (typeof stdin === 'string') {
    try {
      raw = JSON.parse(stdin);
    } catch (e) {
      fail(
        CniErrorCode.DecodeFailure,
        'plugin configuration on stdin is not JSON',
        e instanceof Error ? e.message : String(e),
      );
    }
  }
  if (!isObject(raw)) fail(CniErrorCode.InvalidNetworkConfig, 'plugin configuration on stdin is not a JSON object');
  const name = checkNetworkName(raw['name'], 'plugin configuration');
  checkVersionField(raw['cniVersion'], `network ${name}`);
  checkPluginConf(raw, 0, name);
  if (raw['prevResult'] !== undefined) parseResult(raw['prevResult'], `network ${name}: prevResult`);
  return raw as CniNetConf;
}

/** Validate a result (1.0.0 shape). Throws CniError 6 (`DecodeFailure`) naming the bad field. */
export function parseResult(input: string | unknown, where = 'result'): CniResult {
  let raw: unknown = input;
  if (typeof input === 'string') {
    try {
      raw = JSON.parse(input);
    } catch (e) {
      fail(CniErrorCode.DecodeFailure, `${where} is not JSON`, e instanceof Error ? e.message : String(e));
    }
  }
  const bad = (what: string): never => fail(CniErrorCode.DecodeFailure, `${where}: ${what}`);
  if (!isObject(raw)) return bad('not a JSON object');
  if (typeof raw['cniVersion'] !== 'string') bad('cniVersion is required');
  const ifaces = raw['interfaces'];
  if (ifaces !== undefined) {
    if (!Array.isArray(ifaces)) bad('interfaces must be a list');
    (ifaces as unknown[]).forEach((f, i) => {
      if (!isObject(f) || typeof f['name'] !== 'string' || f['name'] === '') bad(`interfaces[${i}].name is required`);
      const o = f as Record<string, unknown>;
      if (o['mac'] !== undefined && typeof o['mac'] !== 'string') bad(`interfaces[${i}].mac must be a string`);
      if (o['sandbox'] !== undefined && typeof o['sandbox'] !== 'string')
        bad(`interfaces[${i}].sandbox must be a string`);
      if (o['mtu'] !== undefined && !Number.isInteger(o['mtu'])) bad(`interfaces[${i}].mtu must be an integer`);
    });
  }
  const nIfaces = Array.isArray(ifaces) ? ifaces.length : 0;
  const ips = raw['ips'];
  if (ips !== undefined) {
    if (!Array.isArray(ips)) bad('ips must be a list');
    (ips as unknown[]).forEach((ip, i) => {
      if (!isObject(ip) || !isCidr(ip['address']))
        bad(`ips[${i}].address must be an address with prefix length (CIDR)`);
      const o = ip as Record<string, unknown>;
      if (o['gateway'] !== undefined && !isIpAddress(o['gateway'])) bad(`ips[${i}].gateway is not an IP address`);
      const idx = o['interface'];
      if (idx !== undefined && (!Number.isInteger(idx) || (idx as number) < 0 || (idx as number) >= nIfaces)) {
        bad(`ips[${i}].interface ${String(idx)} is not an index into interfaces (${nIfaces} of them)`);
      }
    });
  }
  const routes = raw['routes'];
  if (routes !== undefined) {
    if (!Array.isArray(routes)) bad('routes must be a list');
    (routes as unknown[]).forEach((r, i) => {
      if (!isObject(r) || !isCidr(r['dst'])) bad(`routes[${i}].dst must be a CIDR`);
      const gw = (r as Record<string, unknown>)['gw'];
      if (gw !== undefined && !isIpAddress(gw)) bad(`routes[${i}].gw is not an IP address`);
    });
  }
  const dns = raw['dns'];
  if (dns !== undefined && !isObject(dns)) bad('dns must be an object');
  return raw as unknown as CniResult;
}

/** Validate error JSON from a plugin's stdout; undefined when it is not error JSON. */
export function parseErrorJson(text: string): CniErrorJson | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(raw) || !Number.isInteger(raw['code']) || typeof raw['msg'] !== 'string') return undefined;
  return {
    cniVersion: typeof raw['cniVersion'] === 'string' ? raw['cniVersion'] : '',
    code: raw['code'] as number,
    msg: raw['msg'],
    ...(typeof raw['details'] === 'string' ? { details: raw['details'] } : {}),
  };
}

export function parseVersionResult(text: string): CniVersionResult {
  const bad = (what: string): never => fail(CniErrorCode.DecodeFailure, `VERSION result: ${what}`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    return bad(`not JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  if (!isObject(raw) || typeof raw['cniVersion'] !== 'string') return bad('cniVersion is required');
  const sv = raw['supportedVersions'];
  if (!Array.isArray(sv) || !sv.every((v) => typeof v === 'string'))
    return bad('supportedVersions must be a list of strings');
  return { cniVersion: raw['cniVersion'], supportedVersions: sv as string[] };
}

/** `K=V;K2=V2` → pairs. Throws CniError 4 on a malformed pair. */
export function parseCniArgs(text: string): Array<[string, string]> {
  // A scan over the text instead of split + map: this runs on every plugin call (a pod's ADD is
  // three of them), and the intermediate arrays were a visible share of the garbage.
  const out: Array<[string, string]> = [];
  if (text === '') return out;
  let from = 0;
  for (;;) {
    const semi = text.indexOf(';', from);
    const end = semi < 0 ? text.length : semi;
    const eq = text.indexOf('=', from);
    if (eq < 0 || eq >= end || eq === from) {
      const kv = text.slice(from, end);
      fail(
        CniErrorCode.InvalidEnvironment,
        `CNI_ARGS: invalid pair ${JSON.stringify(kv)}`,
        'expected KEY=VALUE pairs separated by ";"',
      );
    }
    out.push([text.slice(from, eq), text.slice(eq + 1, end)]);
    if (semi < 0) return out;
    from = semi + 1;
  }
}

export function formatCniArgs(args: ReadonlyArray<readonly [string, string]>): string {
  let text = '';
  for (let i = 0; i < args.length; i++) {
    const [k, v] = args[i]!;
    if (k === '' || k.includes('=') || k.includes(';') || v.includes(';'))
      throw new Error(
        `CNI_ARGS: cannot encode ${JSON.stringify(k)}=${JSON.stringify(v)} (no "=" or ";" in keys, no ";" in values)`,
      );
    text += i === 0 ? `${k}=${v}` : `;${k}=${v}`;
  }
  return text;
}

/**
 * Which variables each command requires (spec "Parameters"), plus CNI_PATH for ADD, CHECK and
 * DEL: the reference plugins' skel (Debian 1.1.1) refuses those commands without it, so a
 * runtime must always pass it and our plugin holds runtimes to the same.
 */
const REQUIRED: Record<CniCommand, readonly string[]> = {
  ADD: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  CHECK: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  DEL: ['CNI_CONTAINERID', 'CNI_IFNAME', 'CNI_PATH'],
  VERSION: [],
  GC: ['CNI_PATH'],
  STATUS: [],
};

/**
 * Parse and validate the exec protocol environment, per command. Throws CniError 4
 * (`InvalidEnvironment`) naming every missing or malformed variable.
 */
export function parseCniEnv(env: Readonly<Record<string, string | undefined>>): CniEnv {
  const command = env['CNI_COMMAND'];
  if (command === undefined || command === '')
    fail(CniErrorCode.InvalidEnvironment, 'required env variables [CNI_COMMAND] missing');
  if (!(CNI_COMMANDS as readonly string[]).includes(command)) {
    fail(
      CniErrorCode.InvalidEnvironment,
      `unknown CNI_COMMAND ${JSON.stringify(command)}`,
      `expected one of ${CNI_COMMANDS.join(', ')}`,
    );
  }
  const cmd = command as CniCommand;
  const required = REQUIRED[cmd];
  let complete = true;
  for (const k of required) if (!env[k]) complete = false;
  const missing = complete ? [] : required.filter((k) => !env[k]);
  if (missing.length > 0)
    fail(CniErrorCode.InvalidEnvironment, `required env variables [${missing.join(',')}] missing for ${cmd}`);
  const containerId = env['CNI_CONTAINERID'] || undefined;
  if (containerId !== undefined && !CONTAINER_ID.test(containerId)) {
    fail(
      CniErrorCode.InvalidEnvironment,
      `invalid CNI_CONTAINERID ${JSON.stringify(containerId)}`,
      'must start with a letter or digit, then letters, digits, "_", "." or "-"',
    );
  }
  const ifname = env['CNI_IFNAME'] || undefined;
  if (ifname !== undefined && (ifname.length > 15 || IFNAME_BAD.test(ifname) || ifname === '.' || ifname === '..')) {
    fail(
      CniErrorCode.InvalidEnvironment,
      `invalid CNI_IFNAME ${JSON.stringify(ifname)}`,
      'an interface name: 1-15 characters, no "/", ":" or whitespace',
    );
  }
  return {
    command: cmd,
    containerId,
    netns: env['CNI_NETNS'] || undefined,
    ifname,
    args: parseCniArgs(env['CNI_ARGS'] ?? ''),
    path: splitCniPath(env['CNI_PATH'] ?? ''),
  };
}

/** CNI_PATH's directories, empty entries dropped; the common single directory without split + filter. */
function splitCniPath(text: string): string[] {
  if (text === '') return [];
  if (!text.includes(':')) return [text];
  return text.split(':').filter((p) => p !== '');
}

/** The environment for one call, as a runtime builds it. */
export function cniEnv(opts: {
  command: CniCommand;
  containerId?: string;
  netns?: string;
  ifname?: string;
  args?: ReadonlyArray<readonly [string, string]>;
  path?: readonly string[];
}): Record<string, string> {
  const env: Record<string, string> = { CNI_COMMAND: opts.command };
  if (opts.containerId !== undefined) env['CNI_CONTAINERID'] = opts.containerId;
  if (opts.netns !== undefined) env['CNI_NETNS'] = opts.netns;
  if (opts.ifname !== undefined) env['CNI_IFNAME'] = opts.ifname;
  if (opts.args && opts.args.length > 0) env['CNI_ARGS'] = formatCniArgs(opts.args);
  if (opts.path) env['CNI_PATH'] = opts.path.join(':');
  return env;
}

/** The CNI_ARGS a Kubernetes runtime passes (K8S_POD_* keys, as containerd and cri-o do). */
export function k8sCniArgs(
  pod: { namespace: string; name: string; uid: string },
  sandboxId: string,
): Array<[string, string]> {
  return [
    ['IgnoreUnknown', '1'],
    ['K8S_POD_NAMESPACE', pod.namespace],
    ['K8S_POD_NAME', pod.name],
    ['K8S_POD_INFRA_CONTAINER_ID', sandboxId],
    ['K8S_POD_UID', pod.uid],
  ];
}

/** The address part of a CIDR ("10.244.1.5/24" → "10.244.1.5"). */
export function cidrAddress(cidr: string): string {
  const i = cidr.lastIndexOf('/');
  return i < 0 ? cidr : cidr.slice(0, i);
}

/** A successful exec output carrying `value` as JSON. */
export function execSuccess(value: unknown): CniExecOutput {
  return { exitCode: 0, stdout: JSON.stringify(value), stderr: '' };
}

/** A failed exec output carrying the error JSON (exit code 1, as skel does). */
export function execFailure(err: CniError, cniVersion: string): CniExecOutput {
  return { exitCode: 1, stdout: JSON.stringify(err.toJson(cniVersion)), stderr: '' };
}

/** libcni's code for an error that is not a typed CNI error (types.ErrInternal). */
export const CNI_ERR_INTERNAL = 999;

/**
 * A CNI plugin in process: the exec protocol as a function (environment and stdin in; exit
 * code, stdout and stderr out). Our own plugin implements it, and so do the sim primary
 * plugins, so a runtime can run either unchanged; an executable wrapper maps it onto a real
 * process (process.env, stdin, stdout, exit code).
 */
export interface CniPlugin {
  exec(req: CniExecRequest): Promise<CniExecOutput>;
}
