/** Entry point of `npm run check:soak -- --seeds N` (cli/soak.ts); exit codes as the CLI's (cli/errors.ts). */
import { soakMain } from './soak.js';
import { EXIT_HARNESS } from './errors.js';

try {
  process.exitCode = await soakMain(process.argv.slice(2));
} catch (err) {
  console.error(`check:soak: harness error: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = EXIT_HARNESS;
}
