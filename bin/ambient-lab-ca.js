#!/usr/bin/env node
// The mesh CA process launcher; compiled code lives in dist/ (npm run build).
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const main = path.join(root, 'dist', 'impl', 'linux', 'mesh-ca-main.js');
if (!existsSync(main)) {
  process.stderr.write(`ambient-lab-ca: not built: missing ${main}; run npm run build\n`);
  process.exit(1);
}
await import(pathToFileURL(main).href);
