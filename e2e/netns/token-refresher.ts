/**
 * The kubelet's refresh of projected service-account tokens, for a lab that stays up
 * (`ambient-lab up`): the lab writes each proxy's token once (NetnsLab.writeProxyVolumes, with the
 * manifest's lifetime, 12 h), and without this its proxies' requests to the mesh CA are refused
 * once it expires. Kubelet rewrites a projected token when it is older than 80 % of its lifetime
 * or 24 h; this does the same for the tokens listed in RUN_DIR/projected-tokens.json, each time
 * through a TokenRequest bound to the same pod, written beside the old file and renamed over it
 * (a reader sees the old token or the new one, never part of one).
 *
 *   node dist/e2e/netns/token-refresher.js RUN_DIR [--check-every-ms N] [--max-age-ms N]
 *
 * `--max-age-ms` refreshes sooner than the lifetime says (tests). A failed request is logged and
 * retried at the next check; the old token stays until it is replaced.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WorldApi } from './world-api-client.js';
import {
  PROJECTED_TOKENS_FILE,
  refreshDue,
  writeTokenFile,
  type ProjectedToken,
  type ProjectedTokens,
} from './projected-tokens.js';

function readList(runDir: string): ProjectedTokens {
  return JSON.parse(fs.readFileSync(path.join(runDir, PROJECTED_TOKENS_FILE), 'utf8')) as ProjectedTokens;
}

function saveList(runDir: string, list: ProjectedTokens): void {
  const file = path.join(runDir, PROJECTED_TOKENS_FILE);
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(list, null, 2), { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
}

function log(line: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), ...line })}\n`);
}

async function refreshOnce(runDir: string, maxAgeMs: number | undefined): Promise<void> {
  const list = readList(runDir);
  const api = new WorldApi(list.apiSocket, list.controlSocket);
  const tokens: ProjectedToken[] = [];
  for (const t of list.tokens) {
    if (!refreshDue(t, Date.now(), maxAgeMs)) {
      tokens.push(t);
      continue;
    }
    try {
      const mintedAtMs = Date.now();
      const token = await api.requestToken(t.namespace, t.serviceAccount, t.pod, t.audience, t.expirationSeconds);
      writeTokenFile(t.file, token, t.gid, t.mode);
      tokens.push({ ...t, mintedAtMs });
      log({ msg: 'token refreshed', file: t.file, pod: `${t.namespace}/${t.pod.name}` });
    } catch (e) {
      tokens.push(t);
      log({ msg: 'token refresh failed; retried at the next check', file: t.file, error: (e as Error).message });
    }
  }
  saveList(runDir, { ...list, tokens });
}

function flag(argv: readonly string[], name: string): number | undefined {
  const i = argv.indexOf(name);
  if (i < 0) return undefined;
  const v = Number(argv[i + 1]);
  if (!Number.isInteger(v) || v <= 0) throw new Error(`token-refresher: ${name} needs a positive whole number of ms`);
  return v;
}

async function main(argv: readonly string[]): Promise<void> {
  const runDir = argv[0];
  if (runDir === undefined || runDir.startsWith('--'))
    throw new Error('usage: token-refresher RUN_DIR [--check-every-ms N] [--max-age-ms N]');
  const every = flag(argv, '--check-every-ms') ?? 60_000;
  const maxAgeMs = flag(argv, '--max-age-ms');
  readList(runDir); // fail at start, not later, when the list is missing or not JSON
  log({ msg: 'token refresher running', runDir, checkEveryMs: every, ...(maxAgeMs ? { maxAgeMs } : {}) });
  process.on('SIGTERM', () => process.exit(0));
  for (;;) {
    await new Promise((r) => setTimeout(r, every));
    await refreshOnce(runDir, maxAgeMs);
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(2);
});
