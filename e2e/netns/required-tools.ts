/**
 * Every external program the real-kernel side runs — the netns world, `ambient-lab up`/`status`,
 * `trace --kernel`, the node agent and CNI plugins it starts, and the netns tests — with the
 * Debian package that provides it. One list, used three ways:
 * - start-up checks (netnsWorldFactory.available(), tests/worlds.ts, the CLI) name the missing
 *   packages, so a world is skipped or refused with `apt-get install -y PKG...`;
 * - `.ci/run` installs exactly `node dist/e2e/netns/required-tools.js --missing-packages`;
 * - a tool that fails at run time is reported by toolFailure(), which names the package too.
 *
 * Found by grepping the argv of every execIn/ipIn/run/execFile/spawn in e2e/netns, cli, impl/linux
 * and tests/netns. Essential Debian programs (sh, sleep) are not listed.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface RequiredTool {
  /** A command looked up on PATH, or an absolute file path (the CNI plugins). */
  readonly name: string;
  /** The Debian package that provides it. */
  readonly pkg: string;
  /** Who runs it (for the error message). */
  readonly usedFor: string;
}

export const CNI_PLUGIN_DIR = '/usr/lib/cni';

export const REQUIRED_TOOLS: readonly RequiredTool[] = [
  { name: 'ip', pkg: 'iproute2', usedFor: 'namespaces, links, routes, `ip netns exec` (world, lab runner, CLI)' },
  { name: 'iptables', pkg: 'iptables', usedFor: 'netns tests' },
  { name: 'iptables-save', pkg: 'iptables', usedFor: "reading a pod's rules (world pods(), status, node agent)" },
  { name: 'iptables-restore', pkg: 'iptables', usedFor: 'writing rules (node agent, lab runner, appExec flush)' },
  { name: 'ip6tables', pkg: 'iptables', usedFor: 'netns tests' },
  { name: 'ip6tables-save', pkg: 'iptables', usedFor: 'reading v6 rules (node agent, root snapshot)' },
  { name: 'ip6tables-restore', pkg: 'iptables', usedFor: 'writing v6 rules (node agent, lab runner, appExec flush)' },
  { name: 'ipset', pkg: 'ipset', usedFor: "the node agent's host ipsets, lab files, node reboot" },
  {
    name: 'nft',
    pkg: 'nftables',
    usedFor: "lab files' nftables documents (lab runner); the node agent's nftables backend",
  },
  {
    name: 'conntrack',
    pkg: 'conntrack',
    usedFor:
      'which listener answered a raw (AF_PACKET) SYN (world connect); the strict node agent telling escaped flows',
  },
  { name: 'ss', pkg: 'iproute2', usedFor: "the strict node agent listing and ending a pod's TCP sockets (ss -K)" },
  { name: 'nsenter', pkg: 'util-linux', usedFor: 'the node agent entering pod namespaces' },
  { name: 'setpriv', pkg: 'util-linux', usedFor: 'running pod apps and probes as their uid and capabilities' },
  { name: 'sysctl', pkg: 'procps', usedFor: 'forwarding and unprivileged-port settings in our namespaces' },
  {
    name: `${CNI_PLUGIN_DIR}/bridge`,
    pkg: 'containernetworking-plugins',
    usedFor: 'pod networking (the primary CNI plugin)',
  },
  { name: `${CNI_PLUGIN_DIR}/host-local`, pkg: 'containernetworking-plugins', usedFor: 'pod addresses (IPAM)' },
  { name: `${CNI_PLUGIN_DIR}/loopback`, pkg: 'containernetworking-plugins', usedFor: 'pod loopback' },
];

function executable(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false; // absent or not executable: exactly what this check reports
  }
}

/** Where `name` is found (PATH lookup for a bare command), or undefined. */
export function locateTool(name: string, envPath: string = process.env['PATH'] ?? ''): string | undefined {
  if (name.includes('/')) return executable(name) ? name : undefined;
  for (const dir of envPath.split(':')) {
    if (dir === '') continue;
    const p = path.join(dir, name);
    if (executable(p)) return p;
  }
  return undefined;
}

/** The required tools not found (on `envPath` for commands). */
export function missingTools(envPath?: string, tools: readonly RequiredTool[] = REQUIRED_TOOLS): RequiredTool[] {
  return tools.filter((t) => locateTool(t.name, envPath) === undefined);
}

/** The Debian packages that provide `tools`, each once, in list order. */
export function packagesOf(tools: readonly RequiredTool[]): string[] {
  return [...new Set(tools.map((t) => t.pkg))];
}

/** Every package the real-kernel side needs. */
export function requiredPackages(): string[] {
  return packagesOf(REQUIRED_TOOLS);
}

/** One line: what is missing and the command that installs it; '' when nothing is. */
export function missingToolsReason(missing: readonly RequiredTool[]): string {
  if (missing.length === 0) return '';
  const pkgs = packagesOf(missing);
  return `missing ${missing.map((t) => t.name).join(', ')}: apt-get install -y ${pkgs.join(' ')}`;
}

/** Throw when a required tool is missing (the CLI's start-up check for `what`). */
export function requireTools(what: string, envPath?: string): void {
  const missing = missingTools(envPath);
  if (missing.length > 0) throw new Error(`${what} needs tools this machine lacks — ${missingToolsReason(missing)}`);
}

/** The package of a command in the list (by its basename), if it is one of ours. */
export function packageOfCommand(cmd: string): string | undefined {
  return REQUIRED_TOOLS.find((t) => t.name === cmd || path.basename(t.name) === path.basename(cmd))?.pkg;
}

/**
 * The error for an observation whose tool failed: what ran, where, what it said, and what to do.
 * A failed observation is a harness error, never a verdict (scenarios/model turns it into ERROR).
 */
export class ToolFailure extends Error {
  constructor(
    readonly tool: string,
    readonly argv: readonly string[],
    readonly where: string,
    readonly detail: string,
  ) {
    const pkg = packageOfCommand(tool);
    const missing = locateTool(tool) === undefined;
    const fix = missing
      ? `\`${tool}\` is not installed: apt-get install -y ${pkg ?? `<the package that provides ${tool}>`}`
      : `check that \`${tool}\` works here${pkg ? ` (Debian package ${pkg})` : ''}`;
    super(`observation failed: \`${argv.join(' ')}\` in ${where}: ${detail.trim() || '(no output)'} — ${fix}`);
  }
}

// `node dist/e2e/netns/required-tools.js --missing-packages | --packages | --check`
function main(argv: readonly string[]): number {
  const flag = argv[0] ?? '--check';
  if (flag === '--missing-packages') {
    process.stdout.write(`${packagesOf(missingTools()).join(' ')}\n`);
    return 0;
  }
  if (flag === '--packages') {
    process.stdout.write(`${requiredPackages().join(' ')}\n`);
    return 0;
  }
  if (flag === '--check') {
    const missing = missingTools();
    for (const t of REQUIRED_TOOLS)
      process.stdout.write(
        `${missing.includes(t) ? 'MISSING' : 'ok     '} ${t.name.padEnd(28)} ${t.pkg.padEnd(28)} ${t.usedFor}\n`,
      );
    if (missing.length > 0) process.stderr.write(`${missingToolsReason(missing)}\n`);
    return missing.length > 0 ? 1 : 0;
  }
  process.stderr.write(`usage: required-tools.js [--check | --missing-packages | --packages]\n`);
  return 2;
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  process.exitCode = main(process.argv.slice(2));
