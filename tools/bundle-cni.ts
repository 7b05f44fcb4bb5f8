/**
 * The CNI plugin payload the agent installs on a node, which has no Node.js modules: one ESM file
 * (esbuild bundle of dist/impl/linux/cni-plugin-main.js and its dependencies) and a shell launcher
 * that execs it with the node binary installed next to it (deploy/base/agent.yaml
 * `--payload`). One definition for both image paths: ci/build.Dockerfile runs this file, the
 * offline images (tools/images.ts) call bundleCniPlugin.
 *
 *   node dist/tools/bundle-cni.js APP_DIR   (APP_DIR holds dist/ and node_modules/; writes APP_DIR/cni/)
 */
import { build } from 'esbuild';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const LAUNCHER =
  '#!/bin/sh\n# ambient-lab CNI plugin launcher (installed by the node agent)\nexec /opt/ambient-lab/node /opt/ambient-lab/ambient-lab-cni.mjs "$@"\n';

/**
 * Writes app/cni/ambient-lab-cni.mjs and app/cni/ambient-lab-cni. The dependencies are resolved
 * from app/node_modules. CommonJS dependencies (yaml) `require` Node's built-ins, which an ESM
 * bundle cannot do by itself ("Dynamic require of "process" is not supported"): the banner gives
 * the bundle a real `require`.
 */
export async function bundleCniPlugin(app: string): Promise<void> {
  const entry = path.join(app, 'dist/impl/linux/cni-plugin-main.js');
  if (!fs.existsSync(entry)) throw new Error(`bundling the CNI plugin: ${entry} is missing; compile first (tsc)`);
  fs.mkdirSync(path.join(app, 'cni'), { recursive: true });
  const r = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    outfile: path.join(app, 'cni/ambient-lab-cni.mjs'),
    absWorkingDir: app, // paths in the bundle's comments relative to app, not the build machine's
    banner: {
      js: "import { createRequire as __alCreateRequire } from 'node:module';\nconst require = __alCreateRequire(import.meta.url);",
    },
    logLevel: 'silent',
  });
  if (r.errors.length > 0)
    throw new Error(`bundling the CNI plugin from ${entry}: ${r.errors.map((e) => e.text).join('; ')}`);
  fs.writeFileSync(path.join(app, 'cni/ambient-lab-cni'), LAUNCHER, { mode: 0o755 });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const app = process.argv[2];
  if (!app || process.argv.length !== 3) {
    console.error('usage: node dist/tools/bundle-cni.js APP_DIR (holds dist/ and node_modules/; writes APP_DIR/cni/)');
    process.exit(2);
  }
  try {
    await bundleCniPlugin(path.resolve(app));
  } catch (e) {
    console.error(`bundle-cni: ${(e as Error).message}`);
    process.exit(1);
  }
}
