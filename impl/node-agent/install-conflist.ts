/**
 * Pure edits of CNI configuration files for the installer: which file the runtime uses, how
 * our plugin entry goes into it (chained) or next to it (own conflist), and how it comes out.
 *
 * The container runtime (containerd, CRI-O through libcni) loads the lexicographically first
 * `.conf` / `.conflist` / `.json` file of the conf dir, so "the primary" is that file, ignoring
 * our own. Edits keep every field we do not know (CNI spec: runtimes pass unknown fields
 * through, so a primary CNI may rely on them) and touch only `plugins`.
 */
import { CniError, CniErrorCode, parseConfList, type CniPluginConf } from '../api/cni.js';

const CONF_EXTENSIONS = ['.conf', '.conflist', '.json'] as const;

type JsonObject = Record<string, unknown>;

function extensionOf(name: string): string {
  const i = name.lastIndexOf('.');
  return i < 0 ? '' : name.slice(i);
}

/** Is this file one the runtime would consider (by name)? Hidden files are temporaries. */
export function isConfFileName(name: string): boolean {
  return !name.startsWith('.') && (CONF_EXTENSIONS as readonly string[]).includes(extensionOf(name));
}

/** The file the runtime uses: the first conf file by name, other than `ownFile`. */
export function choosePrimary(names: readonly string[], ownFile: string | undefined): string | undefined {
  return [...names].filter((n) => isConfFileName(n) && n !== ownFile).sort()[0];
}

/** Would the runtime pick `ownFile` over `primary`? (Own-conflist mode needs it to.) */
export function ownSortsFirst(ownFile: string, primary: string): boolean {
  return ownFile < primary;
}

function parseObject(text: string, file: string): JsonObject {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new CniError(CniErrorCode.DecodeFailure, `CNI config ${file} is not valid JSON`, (e as Error).message);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc))
    throw new CniError(CniErrorCode.InvalidNetworkConfig, `CNI config ${file} is not a JSON object`);
  return doc as JsonObject;
}

function serialize(doc: JsonObject): string {
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/**
 * A conf file as a config list object with unknown fields kept. A single-plugin `.conf` (no
 * `plugins`) is wrapped into a list: `cniVersion` and `name` move to the list, the rest is the
 * one plugin. `wrapped` says that happened (chained mode cannot edit such a file in place).
 */
export function readAsList(text: string, file: string): { readonly doc: JsonObject; readonly wrapped: boolean } {
  const doc = parseObject(text, file);
  if (!('plugins' in doc)) {
    const { cniVersion, name, ...plugin } = doc;
    const list = { cniVersion, name, plugins: [plugin] };
    parseConfList(list);
    return { doc: list, wrapped: true };
  }
  try {
    parseConfList(doc);
  } catch (e) {
    if (e instanceof CniError) throw new CniError(e.code, `CNI config ${file}: ${e.msg}`, e.details);
    throw e;
  }
  return { doc, wrapped: false };
}

function pluginsOf(doc: JsonObject): JsonObject[] {
  return doc['plugins'] as JsonObject[];
}

function sameEntry(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Does the list hold exactly one entry of `type`, equal to `entry`? */
function holdsExactly(doc: JsonObject, entry: CniPluginConf): boolean {
  const ours = pluginsOf(doc).filter((p) => p['type'] === entry.type);
  return ours.length === 1 && sameEntry(ours[0], entry);
}

/**
 * The primary's text with our entry chained in, or undefined when it is already there exactly
 * once and current (so an idempotent pass writes nothing — which also keeps our own write from
 * re-triggering the directory watch forever). A stale or duplicated entry is replaced by one
 * entry appended at the end: after the primary and every plugin it already chains.
 */
export function insertChained(text: string, file: string, entry: CniPluginConf): string | undefined {
  const { doc, wrapped } = readAsList(text, file);
  if (wrapped) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `CNI config ${file} is a single-plugin config, which cannot chain another plugin`,
      'use a .conflist primary, or install in own-conflist mode',
    );
  }
  if (holdsExactly(doc, entry)) return undefined;
  const plugins = pluginsOf(doc).filter((p) => p['type'] !== entry.type);
  return serialize({ ...doc, plugins: [...plugins, { ...entry }] });
}

/** The text without any entry of `type`, or undefined when there is none (nothing to write). */
export function removeChained(text: string, file: string, type: string): string | undefined {
  const doc = parseObject(text, file);
  if (!Array.isArray(doc['plugins'])) return undefined;
  const plugins = (doc['plugins'] as unknown[]).filter(
    (p) => !(p && typeof p === 'object' && (p as JsonObject)['type'] === type),
  );
  if (plugins.length === (doc['plugins'] as unknown[]).length) return undefined;
  return serialize({ ...doc, plugins });
}

/** Does this conf text name a plugin of `type`? Unparsable text does not. */
export function mentionsPlugin(text: string, type: string): boolean {
  try {
    const doc = JSON.parse(text) as unknown;
    if (!doc || typeof doc !== 'object') return false;
    const plugins = (doc as JsonObject)['plugins'];
    return (
      Array.isArray(plugins) && plugins.some((p) => p && typeof p === 'object' && (p as JsonObject)['type'] === type)
    );
  } catch {
    return false;
  }
}

/**
 * Our own conflist: the primary's list (its name kept — host-local keys its address store by
 * network name, so renaming would hand out addresses twice) with our entry appended.
 */
export function ownConfList(primaryText: string, primaryFile: string, entry: CniPluginConf): string {
  const { doc } = readAsList(primaryText, primaryFile);
  const plugins = pluginsOf(doc).filter((p) => p['type'] !== entry.type);
  return serialize({ ...doc, plugins: [...plugins, { ...entry }] });
}
