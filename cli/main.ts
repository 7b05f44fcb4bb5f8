/** Entry point of the `ambient-lab` executable. */
import { buildProgram } from './program.js';

try {
  await buildProgram().parseAsync(process.argv);
} catch (err) {
  console.error(`ambient-lab: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
