/** `ambient-lab exec NAMESPACE/POD -- CMD...`: run a command in the pod's network namespace as the pod's uid and the capabilities Kubernetes would grant it (none for a non-root uid). */
import { spawn } from 'node:child_process';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { NetnsLab, effectiveAppCaps } from '../../e2e/netns/world-lab.js';
import { setprivArgs } from '../../e2e/netns/processes.js';
import { DEFAULT_LAB, labDir, requireRoot } from './lab-common.js';
import { UsageError } from '../errors.js';

export const execCommand: CliCommand = {
  name: 'exec',
  register(program: Command): void {
    program
      .command('exec')
      .description(
        "run a command inside a pod of a cluster made by `ambient-lab up`, as the pod's uid and capabilities",
      )
      .argument('<pod>', 'NAMESPACE/NAME (or NAME in namespace demo)')
      .argument('<cmd...>', 'command and arguments (after --)')
      .option('--name <name>', 'lab name', DEFAULT_LAB)
      .addHelpText(
        'after',
        "\nExit code: the command's own; 2 for a usage error of exec itself (bad pod name, no such pod), 3 when exec cannot run (not root, lab not up).",
      )
      .action(async (podArg: string, cmd: string[], opts: { name: string }) => {
        const dir = labDir(opts.name);
        const key = podArg.includes('/') ? podArg : `demo/${podArg}`;
        if (!/^[a-z0-9][a-z0-9.-]*\/[a-z0-9][a-z0-9.-]*$/.test(key))
          throw new UsageError(
            `pod ${JSON.stringify(podArg)}: expected NAMESPACE/NAME or NAME (Kubernetes names: lower-case letters, digits, '-' and '.')`,
          );
        requireRoot('exec');
        const lab = NetnsLab.attach(dir);
        const p = lab.state.pods[key];
        if (!p)
          throw new UsageError(
            `no pod ${key} in lab ${opts.name}; pods: ${Object.keys(lab.state.pods).join(', ') || '(none)'}`,
          );
        if (!p.netns || !p.started) throw new Error(`pod ${key} is not running${p.error ? `: ${p.error}` : ''}`);
        const argv = [
          'netns',
          'exec',
          p.netns,
          ...setprivArgs({ uid: p.appUid, caps: effectiveAppCaps(p).map((c) => c.toLowerCase()) }),
          ...cmd,
        ];
        const code = await new Promise<number>((resolve, reject) => {
          const child = spawn('ip', argv, { stdio: 'inherit' });
          child.on('error', (e) => reject(new Error(`could not run ${cmd.join(' ')} in ${key}: ${e.message}`)));
          child.on('exit', (c, sig) => resolve(c ?? (sig ? 128 : 1)));
        });
        process.exitCode = code;
      });
  },
};
