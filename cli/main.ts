/** Entry point of the `ambient-lab` executable; maps every failure to the exit-code contract (cli/errors.ts). */
import { CommanderError } from 'commander';
import { buildProgram, optionsHint } from './program.js';
import { EXIT_HARNESS, EXIT_USAGE, UsageError } from './errors.js';

const program = buildProgram();
try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Commander printed its own message ("error: unknown option '--x'"); --help and --version end here with 0.
    if (err.exitCode !== 0 && err.code === 'commander.unknownOption')
      console.error(optionsHint(program, process.argv.slice(2)));
    process.exitCode = err.exitCode === 0 ? 0 : EXIT_USAGE;
  } else if (err instanceof UsageError) {
    // A flag's problem gets the pointer to --help; a file's problem stands on its own.
    console.error(`ambient-lab: ${err.message}${err.message.startsWith('-') ? '\n(run with --help for usage)' : ''}`);
    process.exitCode = EXIT_USAGE;
  } else {
    console.error(`ambient-lab: harness error: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = EXIT_HARNESS;
  }
}
