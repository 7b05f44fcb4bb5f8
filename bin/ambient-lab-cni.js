#!/usr/bin/env node
// The CNI plugin executable (chained after the primary plugin). Compiled code lives in dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const main = path.join(root, 'dist', 'impl', 'linux', 'cni-plugin-main.js');
if (!existsSync(main)) {
  process.stdout.write(
    JSON.stringify({
      cniVersion: '1.0.0',
      code: 5,
      msg: 'ambient-lab-cni is not built',
      details: `missing ${main}; run npm run build`,
    }),
  );
  process.exit(1);
}
await import(pathToFileURL(main).href);
