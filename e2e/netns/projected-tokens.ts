/**
 * The projected service-account tokens a lab wrote into its proxies' volumes, as the token
 * refresher (token-refresher.ts, the kubelet's part) reads them: the list, kubelet's refresh
 * rule, and the atomic write both use.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** One projected token the lab wrote (projected-tokens.json). */
export interface ProjectedToken {
  readonly file: string;
  readonly gid: number;
  readonly mode: number;
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly pod: { readonly name: string; readonly uid: string };
  readonly audience: string;
  readonly expirationSeconds: number;
  /** When the token now in `file` was minted (ms since the epoch). */
  readonly mintedAtMs: number;
}

export interface ProjectedTokens {
  readonly apiSocket: string;
  readonly controlSocket: string;
  readonly tokens: readonly ProjectedToken[];
}

export const PROJECTED_TOKENS_FILE = 'projected-tokens.json';

/** Kubelet's rule: refresh past 80 % of the lifetime or 24 h, whichever comes first (or `maxAgeMs`). */
export function refreshDue(t: ProjectedToken, nowMs: number, maxAgeMs?: number): boolean {
  const limit = Math.min(0.8 * t.expirationSeconds * 1000, 24 * 3600 * 1000, maxAgeMs ?? Infinity);
  return nowMs - t.mintedAtMs >= limit;
}

/** Write `text` to `file` as root:gid with `mode`, atomically. */
export function writeTokenFile(file: string, text: string, gid: number, mode: number): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.new`);
  fs.writeFileSync(tmp, text, { mode: 0o600 });
  fs.chownSync(tmp, 0, gid);
  fs.chmodSync(tmp, mode);
  fs.renameSync(tmp, file);
}
