/** `npm run check:ports`: fails the build when impl/ breaks the ports rule or the layering (see ports-check.ts). */
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkPorts, formatViolations } from './ports-check.js';

const root = process.argv[2] ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const violations = checkPorts(root);
if (violations.length > 0) {
  console.error(
    `ports check: ${violations.length} violation(s) of the ports rule or the layering (docs/design.md) in ${root}:`,
  );
  console.error(formatViolations(violations));
  process.exit(1);
}
console.log(
  `ports check: impl/ uses the world only through impl/host, and impl/, sim/, scenarios/ and bench/ keep the layering (${root})`,
);
