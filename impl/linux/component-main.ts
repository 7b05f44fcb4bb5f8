/**
 * What the component mains (node-agent-main.ts, ztunnel-main.ts) share: configuration from flags
 * (`--name=value` or `--name value`) with an environment fallback (AMBIENT_LAB_<NAME>, dashes as
 * underscores), clear start-up errors, and one graceful shutdown on SIGTERM/SIGINT.
 */

export class ConfigError extends Error {}

export class ComponentFlags {
  private readonly values = new Map<string, string>();
  private readonly used = new Set<string>();

  constructor(
    argv: readonly string[],
    private readonly env: NodeJS.ProcessEnv,
    private readonly component: string,
  ) {
    for (let i = 0; i < argv.length; i++) {
      const a = argv[i]!;
      if (!a.startsWith('--'))
        throw new ConfigError(`unexpected argument ${JSON.stringify(a)}: flags are --name=value`);
      const eq = a.indexOf('=');
      if (eq > 0) this.values.set(a.slice(2, eq), a.slice(eq + 1));
      else if (argv[i + 1] !== undefined && !argv[i + 1]!.startsWith('--')) this.values.set(a.slice(2), argv[++i]!);
      else this.values.set(a.slice(2), 'true');
    }
  }

  private raw(name: string): string | undefined {
    this.used.add(name);
    return this.values.get(name) ?? this.env[`AMBIENT_LAB_${name.toUpperCase().replace(/-/g, '_')}`];
  }

  str(name: string, dflt?: string): string {
    const v = this.raw(name) ?? dflt;
    if (v === undefined || v === '')
      throw new ConfigError(
        `${this.component}: --${name} is required (or set AMBIENT_LAB_${name.toUpperCase().replace(/-/g, '_')})`,
      );
    return v;
  }

  optional(name: string): string | undefined {
    const v = this.raw(name);
    return v === '' ? undefined : v;
  }

  int(name: string, dflt: number, min = 0, max = 2 ** 31 - 1): number {
    const v = this.raw(name);
    if (v === undefined) return dflt;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new ConfigError(
        `${this.component}: --${name} must be an integer in ${min}..${max}, got ${JSON.stringify(v)}`,
      );
    return n;
  }

  bool(name: string, dflt: boolean): boolean {
    const v = this.raw(name);
    if (v === undefined) return dflt;
    if (v === 'true' || v === '1') return true;
    if (v === 'false' || v === '0') return false;
    throw new ConfigError(`${this.component}: --${name} must be true or false, got ${JSON.stringify(v)}`);
  }

  oneOf<T extends string>(name: string, options: readonly T[], dflt: T): T {
    const v = this.raw(name) ?? dflt;
    if (!(options as readonly string[]).includes(v))
      throw new ConfigError(
        `${this.component}: --${name} must be one of ${options.join(', ')}, got ${JSON.stringify(v)}`,
      );
    return v as T;
  }

  list(name: string, dflt: readonly string[]): string[] {
    const v = this.raw(name);
    return v === undefined
      ? [...dflt]
      : v
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== '');
  }

  /** Flags given on the command line that no one read: a typo must not be ignored. */
  assertAllUsed(): void {
    const unknown = [...this.values.keys()].filter((k) => !this.used.has(k));
    if (unknown.length > 0)
      throw new ConfigError(`${this.component}: unknown flag(s) ${unknown.map((k) => `--${k}`).join(', ')}`);
  }
}

/**
 * Run a component: `start` returns its stop function. Start-up errors go to stderr as one clear
 * line and exit 2 for a ConfigError (bad flag or value), else 1; SIGTERM/SIGINT call stop once and exit 0 (a second signal exits at once).
 */
export function runComponent(component: string, start: () => Promise<() => Promise<void>>): void {
  let stopping = false;
  start().then(
    (stop) => {
      const onSignal = (sig: NodeJS.Signals): void => {
        if (stopping) process.exit(1);
        stopping = true;
        process.stderr.write(`${component}: ${sig}: shutting down\n`);
        stop().then(
          () => process.exit(0),
          (e: unknown) => {
            process.stderr.write(`${component}: shutdown failed: ${e instanceof Error ? e.message : String(e)}\n`);
            process.exit(1);
          },
        );
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    },
    (e: unknown) => {
      const msg = e instanceof Error ? e.message : String(e);
      process.stderr.write(`${component}: failed to start: ${msg}\n`);
      // A bad flag or value is a usage error (exit 2, as the ambient-lab CLI); anything else 1.
      process.exit(e instanceof ConfigError ? 2 : 1);
    },
  );
}
