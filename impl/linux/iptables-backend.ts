/**
 * Which iptables the node agent runs: iptables-legacy or iptables-nft. The kernel keeps the two
 * apart (legacy x_tables vs nf_tables), so rules written with the wrong one sit beside the node's
 * and are invisible to its tools, and the host probe rule can miss the node's own chains. As
 * upstream istio-cni (tools/istio-iptables/pkg/dependencies, FORCE_IPTABLES_BINARY):
 * - forced `legacy` or `nft`: that variant, or a start-up error if it cannot be used;
 * - otherwise, detected once in the node's network namespace and used for every pod as well:
 *   legacy if `iptables-legacy-save` works and shows rules there (3+ lines), else nft if
 *   `iptables-nft-save` works, else the plain `iptables-save` the system links to either.
 * Upstream also adds and deletes a no-op filter rule to test kernel support; here a working
 * `-save` is the test (it fails without the kernel side), so detection writes nothing to the node.
 */
import { execFile } from 'node:child_process';

export type IptablesBackendChoice = 'legacy' | 'nft';
export const IPTABLES_BACKEND_CHOICES: readonly IptablesBackendChoice[] = ['legacy', 'nft'];

/** The tool names per family, as the NetnsRules adapter runs them. */
export interface IptablesTools {
  /** 'legacy', 'nft', or 'system' (the unsuffixed tools). */
  readonly variant: IptablesBackendChoice | 'system';
  readonly ipv4: { readonly save: string; readonly restore: string };
  readonly ipv6: { readonly save: string; readonly restore: string };
}

export function iptablesTools(variant: IptablesBackendChoice | 'system'): IptablesTools {
  const s = variant === 'system' ? '' : `-${variant}`;
  return {
    variant,
    ipv4: { save: `iptables${s}-save`, restore: `iptables${s}-restore` },
    ipv6: { save: `ip6tables${s}-save`, restore: `ip6tables${s}-restore` },
  };
}

/** Runs a `-save` tool in the node netns: its stdout, or an error if it cannot run or fails. */
type SaveRunner = (tool: string) => Promise<string>;

/** The pure decision, given a runner (tests pass fakes); throws when nothing usable is found. */
export async function chooseIptablesTools(
  force: IptablesBackendChoice | undefined,
  run: SaveRunner,
): Promise<{ tools: IptablesTools; why: string }> {
  const tryRun = async (tool: string): Promise<{ ok: true; out: string } | { ok: false; error: string }> => {
    try {
      return { ok: true, out: await run(tool) };
    } catch (e) {
      return { ok: false, error: e instanceof Error ? e.message : String(e) };
    }
  };
  if (force !== undefined) {
    const t = iptablesTools(force);
    const r = await tryRun(t.ipv4.save);
    if (!r.ok) throw new Error(`--force-iptables-binary ${force}: ${t.ipv4.save} cannot be used: ${r.error}`);
    return { tools: t, why: `forced (--force-iptables-binary ${force})` };
  }
  const errors: string[] = [];
  const legacy = await tryRun(iptablesTools('legacy').ipv4.save);
  if (legacy.ok && legacy.out.split('\n').length - 1 >= 3)
    return { tools: iptablesTools('legacy'), why: 'iptables-legacy-save shows rules in the node netns' };
  if (!legacy.ok) errors.push(legacy.error);
  const nft = await tryRun(iptablesTools('nft').ipv4.save);
  if (nft.ok)
    return {
      tools: iptablesTools('nft'),
      why: legacy.ok
        ? 'no legacy rules in the node netns; iptables-nft works'
        : 'iptables-legacy unusable; iptables-nft works',
    };
  errors.push(nft.error);
  const plain = await tryRun(iptablesTools('system').ipv4.save);
  if (plain.ok)
    return {
      tools: iptablesTools('system'),
      why: 'neither iptables-legacy nor iptables-nft usable; the system iptables works',
    };
  errors.push(plain.error);
  throw new Error(`no usable iptables found in the node netns: ${errors.join('; ')}`);
}

/** Detect (or check the forced choice) with the real tools, run in the node netns (`nsenter --net=PATH`, as the rules adapter runs them). */
export function detectIptablesTools(
  force: IptablesBackendChoice | undefined,
  nodeNetns: string,
  timeoutMs = 30_000,
): Promise<{ tools: IptablesTools; why: string }> {
  return chooseIptablesTools(
    force,
    (tool) =>
      new Promise((resolve, reject) => {
        execFile(
          'nsenter',
          [`--net=${nodeNetns}`, tool],
          { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 },
          (err, stdout, stderr) => {
            if (err) reject(new Error(`${tool}: ${String(stderr).trim() || err.message}`));
            else resolve(String(stdout));
          },
        );
      }),
  );
}
