#!/usr/bin/env node
// Thin launcher: the CLI is TypeScript compiled to dist/ by `npm ci` (the prepare script).
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const main = path.join(root, 'dist', 'cli', 'main.js');
if (!existsSync(main)) {
  console.error(`ambient-lab: ${main} is missing; build it with \`npm run build\` (or \`npm ci\`) in ${root}`);
  process.exit(1);
}
await import(pathToFileURL(main).href);
