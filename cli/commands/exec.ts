/** `ambient-lab exec NAMESPACE/POD -- CMD...`: run a command in the pod's network namespace as the pod's uid and the capabilities Kubernetes would grant it (none for a non-root uid). */
import { spawn } from 'node:child_process';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { NetnsLab, effectiveAppCaps } from '../../e2e/netns/world-lab.js';
import { setprivArgs } from '../../e2e/netns/processes.js';
import { DEFAULT_LAB, labDir, requireRoot } from './lab-common.js';

export const execCommand: CliCommand = {
  name: 'exec',
  register(program: Command): void {
    program
      .command('exec')
      .description('run a command inside a pod of a cluster made by `ambient-lab up`, as the pod\'s uid and capabilities')
      .argument('<pod>', 'NAMESPACE/NAME (or NAME in namespace demo)')
      .argument('<cmd...>', 'command and arguments (after --)')
      .option('--name <name>', 'lab name', DEFAULT_LAB)
      .action(async (podArg: string, cmd: string[], opts: { name: string }) => {
        requireRoot('exec');
        const lab = NetnsLab.attach(labDir(opts.name));
        const key = podArg.includes('/') ? podArg : `demo/${podArg}`;
        const p = lab.state.pods[key];
        if (!p) throw new Error(`no pod ${key} in lab ${opts.name}; pods: ${Object.keys(lab.state.pods).join(', ') || '(none)'}`);
        if (!p.netns || !p.started) throw new Error(`pod ${key} is not running${p.error ? `: ${p.error}` : ''}`);
        const argv = ['netns', 'exec', p.netns, ...setprivArgs({ uid: p.appUid, caps: effectiveAppCaps(p).map((c) => c.toLowerCase()) }), ...cmd];
        const code = await new Promise<number>((resolve, reject) => {
          const child = spawn('ip', argv, { stdio: 'inherit' });
          child.on('error', (e) => reject(new Error(`could not run ${cmd.join(' ')} in ${key}: ${e.message}`)));
          child.on('exit', (c, sig) => resolve(c ?? (sig ? 128 : 1)));
        });
        process.exitCode = code;
      });
  },
};
