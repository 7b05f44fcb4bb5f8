/**
 * `ambient-lab exec NAMESPACE/POD [--uid U] [--caps A,B] -- CMD...`: run a command in the pod's
 * network namespace as the pod's uid and the capabilities Kubernetes would grant it (none for a
 * non-root uid), or as --uid / --caps say. The command gets a clean environment, as a container's
 * process would — the system PATH, HOME=/, and nothing of the caller's (root's shims, tokens).
 */
import { spawn } from 'node:child_process';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { NetnsLab, effectiveAppCaps } from '../../e2e/netns/world-lab.js';
import { setprivArgs } from '../../e2e/netns/processes.js';
import { DEFAULT_LAB, labDir, requireRoot } from './lab-common.js';
import { UsageError, parseIntFlag } from '../errors.js';
import { APP_CAPS } from '../../e2e/netns/lab-control.js';
import { locateTool } from '../../e2e/netns/required-tools.js';

/** A container's environment: the system PATH and nothing of the caller's. */
const POD_ENV: NodeJS.ProcessEnv = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: '/',
  LANG: 'C.UTF-8',
};

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
      .option('--uid <uid>', "run as this uid instead of the pod's")
      .option(
        '--caps <list>',
        `capabilities, comma-separated (${APP_CAPS.join(', ')}), for --uid 0 or a root pod; "" for none`,
      )
      .addHelpText(
        'after',
        "\nExit code: the command's own; 2 for a usage error of exec itself (bad pod name, no such pod), 3 when exec cannot run (not root, lab not up).",
      )
      .action(async (podArg: string, cmd: string[], opts: { name: string; uid?: string; caps?: string }) => {
        const dir = labDir(opts.name);
        const key = podArg.includes('/') ? podArg : `demo/${podArg}`;
        if (!/^[a-z0-9][a-z0-9.-]*\/[a-z0-9][a-z0-9.-]*$/.test(key))
          throw new UsageError(
            `pod ${JSON.stringify(podArg)}: expected NAMESPACE/NAME or NAME (Kubernetes names: lower-case letters, digits, '-' and '.')`,
          );
        const uid = opts.uid !== undefined ? parseIntFlag('--uid', opts.uid, 0, 65534) : undefined;
        const caps =
          opts.caps !== undefined
            ? opts.caps
                .split(',')
                .map((c) => c.trim().toUpperCase().replace(/^CAP_/, ''))
                .filter((c) => c !== '')
            : undefined;
        for (const c of caps ?? [])
          if (!(APP_CAPS as readonly string[]).includes(c))
            throw new UsageError(`--caps ${JSON.stringify(c)}: accepted: ${APP_CAPS.join(', ')}`);
        requireRoot('exec');
        const lab = NetnsLab.attach(dir);
        const p = lab.state.pods[key];
        if (!p)
          throw new UsageError(
            `no pod ${key} in lab ${opts.name}; pods: ${Object.keys(lab.state.pods).join(', ') || '(none)'}`,
          );
        if (!p.netns || !p.started) throw new Error(`pod ${key} is not running${p.error ? `: ${p.error}` : ''}`);
        // `ip` found on the caller's PATH (required-tools.ts checked it), run with the clean one
        const IP = locateTool('ip') ?? 'ip';
        const runAs = uid ?? p.appUid;
        if (caps !== undefined && caps.length > 0 && runAs !== 0)
          throw new UsageError(
            `--caps with uid ${runAs}: a non-root container process gets no added capabilities (as the pods' apps run); use --uid 0`,
          );
        const effective = caps ?? (uid === undefined ? effectiveAppCaps(p) : []);
        const argv = [
          'netns',
          'exec',
          p.netns,
          ...setprivArgs({ uid: runAs, caps: effective.map((c) => c.toLowerCase()) }),
          ...cmd,
        ];
        const code = await new Promise<number>((resolve, reject) => {
          const child = spawn(IP, argv, { stdio: 'inherit', env: POD_ENV });
          child.on('error', (e) => reject(new Error(`could not run ${cmd.join(' ')} in ${key}: ${e.message}`)));
          child.on('exit', (c, sig) => resolve(c ?? (sig ? 128 : 1)));
        });
        process.exitCode = code;
      });
  },
};
