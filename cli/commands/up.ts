/**
 * `ambient-lab up [--nodes N] [--pods M] [--profile P] [--name NAME] [--[no-]ipv6] [--[no-]dns-capture]`:
 * a real-kernel cluster on this machine (private network namespaces, the API process, per node the
 * node agent and proxy as real processes) with M demo pods per node in namespace `demo` (labelled
 * for ambient), left running for a user to explore and drive. IPv6 (dual-stack pods, v6 capture)
 * and DNS capture are on by default, as upstream's chart has them.
 *
 * The cluster is made and kept by a daemon this command starts detached
 * (e2e/netns/lab-daemon-main.ts): every later command reaches it on its control socket,
 * /run/ambient-lab/NAME/cluster.sock, so pods can be added, components stopped, nodes rebooted
 * from any process. State: /run/ambient-lab/NAME/state.json; the daemon's log: daemon.log there.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { spawn } from 'node:child_process';
import { controlSocketOf, labControl, LabDaemonUnavailable } from '../../e2e/netns/lab-control.js';
import type { LabSummary } from '../../e2e/netns/lab-daemon.js';
import type { Profile } from '../../impl/api/profile.js';
import { DEFAULT_LAB, labDir, requireRootAndTools } from './lab-common.js';
import { EXIT_CODES_HELP, HarnessError, UsageError, parseIntFlag } from '../errors.js';

export const upCommand: CliCommand = {
  name: 'up',
  register(program: Command): void {
    program
      .command('up')
      .description(
        'start a real-kernel ambient cluster on this machine (root; private network namespaces) and leave it running',
      )
      .option('--nodes <n>', 'number of nodes', '2')
      .option('--pods <m>', 'demo pods per node (namespace demo, in the mesh)', '2')
      .option('--profile <p>', 'rule profile: upstream or strict', 'upstream')
      .option('--name <name>', 'lab name (several labs can run side by side)', DEFAULT_LAB)
      .option('--ipv6', 'dual-stack pods, v6 captured (the default, as upstream)', true)
      .option('--no-ipv6', 'IPv4-only pods and no v6 capture')
      .option(
        '--dns-capture',
        'the agent captures pod DNS (the default, as upstream; the lab has no DNS server, so captured DNS fails closed)',
        true,
      )
      .option('--no-dns-capture', 'the agent does not capture pod DNS')
      .addHelpText('after', `\n${EXIT_CODES_HELP}`)
      .action(
        async (opts: {
          nodes: string;
          pods: string;
          profile: string;
          name: string;
          ipv6: boolean;
          dnsCapture: boolean;
        }) => {
          // Usage first (exit 2), then what the machine must offer (exit 3).
          const nodes = parseIntFlag('--nodes', opts.nodes, 1, 16);
          const pods = parseIntFlag('--pods', opts.pods, 0, 50);
          if (opts.profile !== 'upstream' && opts.profile !== 'strict')
            throw new UsageError(
              `--profile ${JSON.stringify(opts.profile)}: unknown profile; accepted: upstream, strict`,
            );
          const profile: Profile = opts.profile;
          const dir = labDir(opts.name);
          requireRootAndTools('up');
          if (fs.existsSync(path.join(dir, 'state.json')))
            throw new HarnessError(
              `lab ${opts.name} is already up (${dir}); run \`ambient-lab down --name ${opts.name}\` first`,
            );
          const t0 = Date.now();
          const summary = await startDaemon(dir, {
            name: opts.name,
            nodes,
            pods,
            profile,
            ipv6: opts.ipv6,
            dnsCapture: opts.dnsCapture,
          });
          process.stdout.write(
            `ambient-lab ${opts.name} is up in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${nodes} node(s), ${nodes * pods} pod(s) in namespace demo (port 8080); ` +
              `profile ${profile}, IPv6 ${opts.ipv6 ? 'on' : 'off'}, DNS capture ${opts.dnsCapture ? 'on' : 'off'}\n` +
              `  state:      ${path.join(summary.runDir, 'state.json')}\n  kubeconfig: ${summary.kubeconfig} (reachable from the node namespaces)\n` +
              `  control:    ${controlSocketOf(summary.runDir)} (daemon pid ${summary.daemonPid}, log ${path.join(summary.runDir, 'daemon.log')})\n` +
              `  try:        ambient-lab status; ambient-lab pod add web --namespace demo --tcp-port 8080; ambient-lab exec demo/node-0-app-0 -- node -e "..."; ambient-lab down\n`,
          );
        },
      );
  },
};

/** How long `up` waits for the daemon to have made the cluster. */
const UP_TIMEOUT_MS = 300_000;

/**
 * Start the cluster's daemon detached (it outlives this process) and wait until its control
 * socket answers; if it ends first, its log says why (a HarnessError with the log's tail).
 */
async function startDaemon(dir: string, o: Record<string, unknown>): Promise<LabSummary> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const logFile = path.join(dir, 'daemon.log');
  const fd = fs.openSync(logFile, 'a', 0o600);
  const main = fileURLToPath(new URL('../../e2e/netns/lab-daemon-main.js', import.meta.url));
  const child = spawn(process.execPath, [main, JSON.stringify(o)], {
    detached: true,
    stdio: ['ignore', fd, fd],
    cwd: fileURLToPath(new URL('../../..', import.meta.url)),
  });
  fs.closeSync(fd);
  let exited: string | undefined;
  child.on('exit', (code, sig) => (exited = sig ? `signal ${sig}` : `exit code ${code}`));
  child.unref();
  const deadline = Date.now() + UP_TIMEOUT_MS;
  const sock = controlSocketOf(dir);
  for (;;) {
    if (exited !== undefined) {
      const tail = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').slice(-2000) : '(no log)';
      // A state file left means the daemon could not take down what it made: keep it for `down`.
      // Otherwise nothing of the cluster is left but the log, printed here.
      const left = fs.existsSync(path.join(dir, 'state.json'));
      if (!left) fs.rmSync(dir, { recursive: true, force: true });
      throw new HarnessError(
        `the cluster's daemon ended (${exited}) before the cluster was up${left ? `; parts of it may be left: run \`ambient-lab down --name ${String(o['name'])}\`` : ''}; its log:\n${tail}`,
      );
    }
    try {
      return (await labControl(sock, { op: 'ping' }, 10_000)) as LabSummary;
    } catch (e) {
      if (!(e instanceof LabDaemonUnavailable)) throw e;
    }
    if (Date.now() > deadline) {
      child.kill('SIGTERM');
      throw new HarnessError(
        `the cluster's daemon (pid ${child.pid}) did not answer on ${sock} within ${UP_TIMEOUT_MS / 1000} s; it was asked to stop; see ${logFile}`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}
