/**
 * The CNI plugin executable: maps the exec protocol (environment, stdin, stdout, exit code) onto
 * AmbientCniPlugin with the real adapters. Logs go to stderr, results and errors to stdout.
 * Installed as `ambient-lab-cni` in the CNI bin dir (see bin/ambient-lab-cni.js).
 */
import { AmbientCniPlugin } from '../cni-plugin/cni-plugin.js';
import { SystemClock } from './clock.js';
import { HttpPluginEventTransport } from './plugin-events-http.js';
import { JsonLineLogger, parseLevel } from './logger-json.js';
import { LiteKubeReader } from './kube-reader.js';

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function main(): Promise<number> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  const stdin = env['CNI_COMMAND'] === 'VERSION' && process.stdin.isTTY ? '' : await readStdin();
  const plugin = new AmbientCniPlugin({
    openKube: (path) => new LiteKubeReader(path),
    events: new HttpPluginEventTransport(),
    clock: new SystemClock(),
    log: new JsonLineLogger('ambient-lab-cni', parseLevel(env['AMBIENT_LAB_CNI_LOG_LEVEL'], 'warn')),
  });
  const out = await plugin.exec({ env, stdin });
  if (out.stdout) process.stdout.write(out.stdout);
  if (out.stderr) process.stderr.write(out.stderr);
  return out.exitCode;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stdout.write(
      JSON.stringify({
        cniVersion: '1.0.0',
        code: 999,
        msg: 'ambient-lab-cni crashed',
        details: e instanceof Error ? e.message : String(e),
      }),
    );
    process.exitCode = 1;
  },
);
