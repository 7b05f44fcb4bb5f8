/**
 * Checked observations of the real kernel for the netns world: a tool run in one of our
 * namespaces whose failure is a harness error (ToolFailure: the command, the namespace, what it
 * said, the Debian package), never an empty answer that reads as "nothing there".
 */
import { CommandError, run, runOutput } from './ip.js';
import { locateTool, ToolFailure } from './required-tools.js';

/** Run `argv` in netns `ns` and return its stdout; any failure (exit code, spawn error, timeout) throws ToolFailure. */
export async function observeIn(
  ns: string,
  argv: readonly string[],
  opts: { input?: string; timeoutMs?: number } = {},
): Promise<string> {
  return (await observeInOutput(ns, argv, opts)).stdout;
}

/** observeIn(), with stderr too. */
export async function observeInOutput(
  ns: string,
  argv: readonly string[],
  opts: { input?: string; timeoutMs?: number } = {},
): Promise<{ stdout: string; stderr: string }> {
  try {
    return await runOutput(['ip', 'netns', 'exec', ns, ...argv], opts.input, opts.timeoutMs);
  } catch (e) {
    throw toolFailureOf(e, argv, ['ip', 'netns', 'exec', ns, ...argv], `netns ${ns}`);
  }
}

/** Run `argv` (iproute2's `ip -n NS ...` etc.) and return its stdout; failure throws ToolFailure. */
export async function observe(argv: readonly string[], where: string): Promise<string> {
  try {
    return await run(argv);
  } catch (e) {
    throw toolFailureOf(e, argv, argv, where);
  }
}

function toolFailureOf(e: unknown, argv: readonly string[], full: readonly string[], where: string): ToolFailure {
  // `ip netns exec` runs the tool: when `ip` itself is absent, that is the tool that failed.
  const tool = full[0] === 'ip' && locateTool('ip') === undefined ? 'ip' : (argv[0] ?? '?');
  const detail =
    e instanceof CommandError
      ? `exit ${e.code ?? 'by signal or not started'}: ${e.stderr}`
      : e instanceof Error
        ? e.message
        : String(e);
  return new ToolFailure(tool, full, where, detail);
}

/** One conntrack entry's original and reply tuples (TCP). */
interface ConntrackEntry {
  readonly orig: { readonly src: string; readonly dst: string; readonly sport: number; readonly dport: number };
  readonly reply: { readonly src: string; readonly dst: string; readonly sport: number; readonly dport: number };
}

/**
 * Parse `conntrack -L -p tcp ...` output. `stderr` must carry conntrack's own summary
 * ("N flow entries have been shown."), and N must equal the entries parsed from stdout: that is
 * what tells "no entry" (a real state: no NAT happened) from a tool that did not really run or
 * printed something this parser does not understand. Throws on any mismatch.
 */
export function parseConntrackList(stdout: string, stderr: string, what: string): ConntrackEntry[] {
  const summary = /(\d+) flow entr(?:y|ies) ha(?:s|ve) been shown/.exec(stderr);
  if (!summary)
    throw new Error(
      `${what}: conntrack printed no summary line (expected "N flow entries have been shown."); stderr: ${stderr.trim() || '(empty)'}`,
    );
  const out: ConntrackEntry[] = [];
  const tuple = /src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+)/g;
  for (const line of stdout.split('\n')) {
    if (line.trim() === '') continue;
    const t = [...line.matchAll(tuple)];
    if (t.length < 2) throw new Error(`${what}: a conntrack line without both tuples: ${line.trim()}`);
    const tu = (m: RegExpMatchArray): ConntrackEntry['orig'] => ({
      src: m[1]!,
      dst: m[2]!,
      sport: Number(m[3]),
      dport: Number(m[4]),
    });
    out.push({ orig: tu(t[0]!), reply: tu(t[1]!) });
  }
  if (out.length !== Number(summary[1]))
    throw new Error(
      `${what}: conntrack says ${summary[1]} entries but ${out.length} were parsed from its output: ${stdout.trim().slice(0, 300)}`,
    );
  return out;
}
