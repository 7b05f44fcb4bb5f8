/**
 * Offline images (issue #17 items 2 and 6): builds, or reuses, the base, node, agent and proxy
 * images on a machine with a Docker daemon and no container registry.
 *
 * - base (`ambient-lab/base:<hash>`): a `debootstrap --variant=minbase` Debian rootfs with the
 *   packages of ci/base/packages.txt installed into it and the running Node.js 20 binary at
 *   /usr/local/bin/node (where node:20-bookworm-slim keeps it, which the Dockerfiles and the
 *   manifests' `--payload` expect), imported with `docker import`. The mirror comes from this
 *   machine's apt sources at run time, never from the repository.
 * - build (`ambient-lab/build:<hash>`): not a build at all but the host's tree in /app, staged from
 *   what `npm ci` already made here (production node_modules, the native addons) plus a fresh
 *   `tsc` and the esbuild bundle of the CNI plugin — what ci/build.Dockerfile does with network.
 * - node, agent, proxy: ci/<name>.Dockerfile FROM the base, copying from that build image;
 *   `docker build --network none`, so an image that would need the network fails to build.
 *
 * Every tag is a hash of that image's inputs, so an existing tag is reused without rebuilding
 * (the images are the cache; old tags are never removed here).
 */
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The Debian release the images are built from (node:20-bookworm-slim's, so both bases agree). */
const SUITE = 'bookworm';
/** The apt sources this machine may have; the first with a usable entry gives the mirror. */
const APT_SOURCES = ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list'];
/** The images built FROM the base, each from ci/<name>.Dockerfile. */
const APP_IMAGES = ['node', 'agent', 'proxy'] as const;
/**
 * What of the repository goes into the build image (tsc's inputs, the bin launchers, the native
 * addons' sources): a change in any file under these changes the app images' tags. Docs,
 * fixtures and CI files do not go into an image.
 */
const APP_INPUTS = [
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'playwright.config.ts',
  'binding.gyp',
  'bin',
  'impl',
  'sim',
  'scenarios',
  'e2e',
  'cli',
  'tools',
  'bench',
  'tests',
];
const PATH_ENV = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface LocalImageTags {
  readonly base: string;
  readonly node: string;
  readonly agent: string;
  readonly proxy: string;
}

export interface BuildImagesOptions {
  /** Progress lines (what is built or reused, and how long it took). */
  readonly log?: (line: string) => void;
  /** The repository root; found from this file's location when absent. */
  readonly repoRoot?: string;
}

/** `# comment` and blank lines dropped; each remaining line one package name. */
export function parsePackageList(text: string, file: string): string[] {
  const out: string[] = [];
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') continue;
    if (!/^[a-z0-9][a-z0-9+.-]+$/.test(line))
      throw new Error(`${file}:${i + 1}: ${JSON.stringify(line)} is not a Debian package name (one name per line)`);
    out.push(line);
  }
  if (out.length === 0) throw new Error(`${file}: no package names (one Debian package name per line)`);
  return out;
}

interface AptEntry {
  readonly types: readonly string[];
  readonly uris: readonly string[];
  readonly suites: readonly string[];
  readonly components: readonly string[];
}

/** deb822 (`*.sources`): paragraphs of `Field: value` lines; continuation lines start with a space. */
function parseDeb822(text: string): AptEntry[] {
  const entries: AptEntry[] = [];
  for (const para of text.split(/\n[ \t]*\n/)) {
    const fields = new Map<string, string>();
    let last: string | undefined;
    for (const raw of para.split('\n')) {
      if (/^\s*#/.test(raw) || raw.trim() === '') continue;
      if (/^\s/.test(raw) && last !== undefined) {
        fields.set(last, `${fields.get(last)} ${raw.trim()}`);
        continue;
      }
      const m = /^([A-Za-z0-9-]+):\s*(.*)$/.exec(raw);
      if (!m) continue;
      last = m[1]!.toLowerCase();
      fields.set(last, m[2]!.trim());
    }
    if (fields.get('enabled')?.toLowerCase() === 'no') continue;
    const list = (k: string): string[] => (fields.get(k) ?? '').split(/\s+/).filter((s) => s !== '');
    if (fields.size > 0)
      entries.push({
        types: list('types'),
        uris: list('uris'),
        suites: list('suites'),
        components: list('components'),
      });
  }
  return entries;
}

/** One-line format (`sources.list`): `deb [options] URI SUITE COMPONENT...`. */
function parseOneLine(text: string): AptEntry[] {
  const entries: AptEntry[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    const m = /^(deb|deb-src)\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s*(.*)$/.exec(line);
    if (!m) continue;
    entries.push({ types: [m[1]!], uris: [m[2]!], suites: [m[3]!], components: m[4]!.split(/\s+/).filter(Boolean) });
  }
  return entries;
}

/**
 * The Debian mirror to debootstrap `suite` from, out of one apt sources file (deb822 when its
 * name ends in `.sources`, else one-line). An entry serving `suite` itself is preferred; else any
 * release suite (no `-updates`/`-security` in its name: the same archive holds every release,
 * e.g. a trixie machine's mirror has bookworm too). Only `deb` entries with `main` count.
 * Undefined when the file has no such entry.
 */
export function mirrorFromAptSources(text: string, file: string, suite: string = SUITE): string | undefined {
  const entries = (file.endsWith('.sources') ? parseDeb822(text) : parseOneLine(text)).filter(
    (e) => e.types.includes('deb') && e.components.includes('main') && e.uris.some((u) => /^https?:\/\//.test(u)),
  );
  const uri = (e: AptEntry): string => e.uris.find((u) => /^https?:\/\//.test(u))!;
  const exact = entries.find((e) => e.suites.includes(suite));
  if (exact) return uri(exact);
  const release = entries.find((e) => e.suites.some((s) => /^[a-z]+$/.test(s)));
  return release ? uri(release) : undefined;
}

/** The mirror from this machine's apt sources; throws naming the files read when none has one. */
export function machineMirror(files: readonly string[] = APT_SOURCES, suite: string = SUITE): string {
  const read: string[] = [];
  for (const f of files) {
    let text: string;
    try {
      text = fs.readFileSync(f, 'utf8');
    } catch {
      continue; // this machine keeps its sources in the other file
    }
    read.push(f);
    const m = mirrorFromAptSources(text, f, suite);
    if (m) return m;
  }
  throw new Error(
    `no Debian mirror for debootstrap: ${read.length === 0 ? `none of ${files.join(', ')} exists` : `no "deb" entry with component main and an http(s) URI in ${read.join(', ')}`}; add this machine's Debian mirror to its apt sources (the images' mirror is never written into the repository)`,
  );
}

/** sha256 over labelled parts, order-sensitive; 16 hex digits are plenty for a local tag. */
export function hashInputs(parts: ReadonlyArray<readonly [string, string | Buffer]>): string {
  const h = createHash('sha256');
  for (const [label, value] of parts) {
    h.update(`${label}\0${Buffer.byteLength(value)}\0`);
    h.update(value);
  }
  return h.digest('hex').slice(0, 16);
}

/** Every file under the given repository paths (sorted, relative), skipping build outputs. */
function listFiles(root: string, rels: readonly string[]): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    const st = fs.lstatSync(path.join(root, rel), { throwIfNoEntry: false });
    if (!st) return;
    if (st.isDirectory()) {
      for (const e of fs.readdirSync(path.join(root, rel)).sort())
        if (e !== 'node_modules' && e !== 'dist') walk(path.join(rel, e));
    } else if (st.isFile()) out.push(rel);
  };
  for (const r of rels) walk(r);
  return out.sort();
}

function findRepoRoot(): string {
  // dist/tools/images.js or tools/images.ts (run by Playwright from source): walk up to our package.json
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = path.join(dir, 'package.json');
    if (fs.existsSync(pkg) && (JSON.parse(fs.readFileSync(pkg, 'utf8')) as { name?: string }).name === 'ambient-lab')
      return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`ambient-lab's package.json not found above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}

interface RunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function run(
  cmd: string,
  args: readonly string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(cmd, [...args], { ...opts, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      // err.code is the exit code, or a string such as ENOENT when the command did not start
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) || (err && code === -1 ? err.message : '') });
    });
  });
}

async function mustRun(
  cmd: string,
  args: readonly string[],
  what: string,
  opts: { cwd?: string } = {},
): Promise<string> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0)
    throw new Error(
      `${what}: \`${cmd} ${args.join(' ')}\` exited ${r.code}: ${(r.stderr || r.stdout).trim().slice(-2000)}`,
    );
  return r.stdout;
}

/** `a | b` without a shell: a's stdout into b's stdin; rejects naming the command that failed. */
function pipe(a: readonly string[], b: readonly string[], what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const pa = spawn(a[0]!, a.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    const pb = spawn(b[0]!, b.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
    pa.stdout.pipe(pb.stdin);
    let errA = '';
    let errB = '';
    let out = '';
    pa.stderr.on('data', (d: Buffer) => (errA += d.toString()));
    pb.stderr.on('data', (d: Buffer) => (errB += d.toString()));
    pb.stdout.on('data', (d: Buffer) => (out += d.toString()));
    let codeA: number | null | undefined;
    let codeB: number | null | undefined;
    const done = (): void => {
      if (codeA === undefined || codeB === undefined) return;
      if (codeA !== 0) reject(new Error(`${what}: \`${a.join(' ')}\` exited ${codeA}: ${errA.trim()}`));
      else if (codeB !== 0) reject(new Error(`${what}: \`${b.join(' ')}\` exited ${codeB}: ${errB.trim()}`));
      else resolve(out.trim());
    };
    pa.on('error', reject);
    pb.on('error', reject);
    pa.on('close', (c) => {
      codeA = c;
      done();
    });
    pb.on('close', (c) => {
      codeB = c;
      done();
    });
  });
}

async function imageExists(tag: string): Promise<boolean> {
  return (await run('docker', ['image', 'inspect', '--format', '{{.Id}}', tag])).code === 0;
}

async function requireDocker(): Promise<void> {
  const r = await run('docker', ['info', '--format', '{{.ServerVersion}}']);
  if (r.code === -1)
    throw new Error(`Docker is not installed (no \`docker\` on PATH): install Debian's docker.io (.ci/run does)`);
  if (r.code !== 0)
    throw new Error(
      `Docker is not available: \`docker info\` exited ${r.code}: ${r.stderr.trim()}; start dockerd (Debian package docker.io; .ci/run starts it with --bridge=none --iptables=false --ip6tables=false --ip-forward=false)`,
    );
}

/**
 * A lock across processes (Playwright's workers may all ask at once): a directory in the temp dir
 * holding the owner's pid; a dead owner's lock is taken over.
 */
async function withLock<T>(log: (l: string) => void, fn: () => Promise<T>): Promise<T> {
  const dir = path.join(os.tmpdir(), 'ambient-lab-images.lock');
  let told = false;
  for (;;) {
    try {
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'pid'), String(process.pid));
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      let owner = NaN; // NaN: the owner has not written its pid yet
      try {
        owner = Number(fs.readFileSync(path.join(dir, 'pid'), 'utf8') || NaN);
      } catch {
        // the owner is between mkdir and writing its pid, or has just released the lock
      }
      if (Number.isInteger(owner) && !alive(owner)) {
        fs.rmSync(dir, { recursive: true, force: true });
        continue;
      }
      if (!told) log(`images: waiting for another build (pid ${owner || '?'}, lock ${dir})`);
      told = true;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The base image's tag: the package list, the suite, Node's version and binary, this builder. */
function baseTag(root: string, packagesText: string, nodeBinary: Buffer): string {
  const hash = hashInputs([
    ['suite', SUITE],
    ['variant', 'minbase'],
    ['packages', packagesText],
    ['node-version', process.version],
    ['node-binary', createHash('sha256').update(nodeBinary).digest('hex')],
    ['builder', fs.readFileSync(path.join(root, 'tools/images.ts'))],
  ]);
  return `ambient-lab/base:${hash}`;
}

/** Unmounts what debootstrap may have left mounted under dir (it mounts proc and sys), then deletes it. */
async function removeRootfs(dir: string): Promise<void> {
  const mounts = fs
    .readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1] ?? '')
    .filter((m) => m === dir || m.startsWith(dir + '/'))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) await run('umount', ['-l', m]);
  // never rm -rf through a mount point: a leftover mount is left alone with its directory
  if (mounts.length > 0 && (await run('findmnt', ['-R', dir])).code === 0)
    throw new Error(`debootstrap left mounts under ${dir} that did not unmount; unmount them and remove ${dir}`);
  fs.rmSync(dir, { recursive: true, force: true });
}

async function buildBase(
  root: string,
  tag: string,
  packages: readonly string[],
  log: (l: string) => void,
): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error(`building ${tag} needs root (debootstrap); run as root`);
  if ((await run('debootstrap', ['--version'])).code === -1)
    throw new Error(`debootstrap is not installed: install Debian's debootstrap (.ci/run does) to build ${tag}`);
  const mirror = machineMirror();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ambient-lab-rootfs-'));
  try {
    const t0 = Date.now();
    log(`images: debootstrap --variant=minbase ${SUITE} from ${mirror} (a few minutes)`);
    await mustRun(
      'debootstrap',
      ['--variant=minbase', `--include=${packages.join(',')}`, SUITE, dir, mirror],
      `debootstrap of ${tag}'s rootfs into ${dir}`,
    );
    fs.copyFileSync(process.execPath, path.join(dir, 'usr/local/bin/node'));
    fs.chmodSync(path.join(dir, 'usr/local/bin/node'), 0o755);
    fs.rmSync(path.join(dir, 'var/cache/apt/archives'), { recursive: true, force: true });
    fs.mkdirSync(path.join(dir, 'var/cache/apt/archives/partial'), { recursive: true });
    fs.rmSync(path.join(dir, 'var/lib/apt/lists'), { recursive: true, force: true });
    fs.mkdirSync(path.join(dir, 'var/lib/apt/lists/partial'), { recursive: true });
    log(`images: rootfs ready in ${Math.round((Date.now() - t0) / 1000)} s; importing as ${tag}`);
    await pipe(
      ['tar', '--numeric-owner', '--xattrs', '-C', dir, '-c', '.'],
      ['docker', 'import', '--change', `ENV PATH=${PATH_ENV}`, '--change', 'CMD ["/bin/bash"]', '-', tag],
      `importing ${dir} as ${tag}`,
    );
  } finally {
    await removeRootfs(dir);
  }
}

/**
 * The host's tree in /app of a staging dir, as ci/build.Dockerfile leaves it in its image: a fresh
 * tsc output, production node_modules (`npm prune --omit=dev --offline` on a copy of the installed
 * ones), the native addons this machine built, and the CNI plugin bundle with its launcher.
 */
async function stageApp(root: string, stage: string, log: (l: string) => void): Promise<void> {
  const app = path.join(stage, 'app');
  fs.mkdirSync(app, { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(root, f), path.join(app, f));
  fs.cpSync(path.join(root, 'bin'), path.join(app, 'bin'), { recursive: true });
  const release = path.join(root, 'build/Release');
  const addons = fs.existsSync(release) ? fs.readdirSync(release).filter((f) => f.endsWith('.node')) : [];
  if (addons.length === 0)
    throw new Error(`no native addons in ${release}: run \`npm ci\` (it builds them) before building the images`);
  fs.mkdirSync(path.join(app, 'build/Release'), { recursive: true });
  for (const a of addons) fs.copyFileSync(path.join(release, a), path.join(app, 'build/Release', a));
  log('images: tsc into the staging tree');
  await mustRun(
    process.execPath,
    [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json', '--outDir', path.join(app, 'dist')],
    'compiling the TypeScript for the images',
    { cwd: root },
  );
  const esbuild = path.join(root, 'node_modules/.bin/esbuild');
  if (!fs.existsSync(esbuild)) throw new Error(`${esbuild} is missing: run \`npm ci\` (esbuild is a devDependency)`);
  fs.mkdirSync(path.join(app, 'cni'));
  await mustRun(
    esbuild,
    [
      path.join(app, 'dist/impl/linux/cni-plugin-main.js'),
      '--bundle',
      '--platform=node',
      '--target=node20',
      '--format=esm',
      '--log-level=warning',
      `--outfile=${path.join(app, 'cni/ambient-lab-cni.mjs')}`,
    ],
    'bundling the CNI plugin',
  );
  // the same launcher ci/build.Dockerfile writes; the agent installs it with node next to it (--payload)
  fs.writeFileSync(
    path.join(app, 'cni/ambient-lab-cni'),
    '#!/bin/sh\n# ambient-lab CNI plugin launcher (installed by the node agent)\nexec /opt/ambient-lab/node /opt/ambient-lab/ambient-lab-cni.mjs "$@"\n',
    { mode: 0o755 },
  );
  log('images: production node_modules (npm prune --omit=dev --offline on a copy)');
  fs.cpSync(path.join(root, 'node_modules'), path.join(app, 'node_modules'), {
    recursive: true,
    verbatimSymlinks: true,
  });
  await mustRun(
    'npm',
    ['prune', '--omit=dev', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'],
    'pruning dev dependencies from the staged node_modules',
    { cwd: app },
  );
}

async function buildAppImages(
  root: string,
  base: string,
  log: (l: string) => void,
): Promise<{ readonly node: string; readonly agent: string; readonly proxy: string }> {
  const inputs = listFiles(root, APP_INPUTS);
  const release = path.join(root, 'build/Release');
  const addons = fs.existsSync(release)
    ? fs
        .readdirSync(release)
        .filter((f) => f.endsWith('.node'))
        .sort()
    : [];
  const appHash = hashInputs([
    ['base', base],
    ...inputs.map((f): [string, Buffer] => [`file:${f}`, fs.readFileSync(path.join(root, f))]),
    ...addons.map((a): [string, Buffer] => [`addon:${a}`, fs.readFileSync(path.join(release, a))]),
  ]);
  const buildTag = `ambient-lab/build:${appHash}`;
  const tags = Object.fromEntries(
    APP_IMAGES.map((n) => {
      const dockerfile = fs.readFileSync(path.join(root, `ci/${n}.Dockerfile`));
      return [
        n,
        `ambient-lab/${n}:${hashInputs([
          ['app', appHash],
          ['dockerfile', dockerfile],
        ])}`,
      ];
    }),
  ) as Record<(typeof APP_IMAGES)[number], string>;
  const missing: Array<(typeof APP_IMAGES)[number]> = [];
  for (const n of APP_IMAGES) if (!(await imageExists(tags[n]))) missing.push(n);
  if (missing.length === 0) {
    log(`images: reusing ${APP_IMAGES.map((n) => tags[n]).join(', ')}`);
    return tags;
  }
  if (!(await imageExists(buildTag))) {
    const t0 = Date.now();
    const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'ambient-lab-stage-'));
    try {
      await stageApp(root, stage, log);
      await pipe(
        ['tar', '--numeric-owner', '-C', stage, '-c', 'app'],
        ['docker', 'import', '-', buildTag],
        `importing the staged tree ${stage} as ${buildTag}`,
      );
    } finally {
      fs.rmSync(stage, { recursive: true, force: true });
    }
    log(`images: ${buildTag} in ${Math.round((Date.now() - t0) / 1000)} s`);
  }
  // nothing is sent from the context: the Dockerfiles copy only from the build image
  const context = fs.mkdtempSync(path.join(os.tmpdir(), 'ambient-lab-context-'));
  try {
    for (const n of missing) {
      const t0 = Date.now();
      await mustRun(
        'docker',
        [
          'build',
          '--network',
          'none',
          '--build-arg',
          `BASE_IMAGE=${base}`,
          '--build-arg',
          `BUILD_IMAGE=${buildTag}`,
          '-f',
          path.join(root, `ci/${n}.Dockerfile`),
          '-t',
          tags[n],
          context,
        ],
        `building ${tags[n]} from ci/${n}.Dockerfile`,
      );
      log(`images: built ${tags[n]} in ${Math.round((Date.now() - t0) / 1000)} s`);
    }
  } finally {
    fs.rmSync(context, { recursive: true, force: true });
  }
  return tags;
}

/**
 * Builds what is missing of base → node, agent, proxy, offline, and returns the four tags. Throws
 * naming the Debian package when Docker or debootstrap is missing.
 */
export async function buildLocalImages(opts: BuildImagesOptions = {}): Promise<LocalImageTags> {
  const log = opts.log ?? ((): void => {});
  const root = opts.repoRoot ?? findRepoRoot();
  if (!process.version.startsWith('v20.'))
    throw new Error(
      `the images carry the running Node.js binary and must have Node 20; this is ${process.version} (${process.execPath}): run the build with Node 20`,
    );
  await requireDocker();
  const packagesFile = path.join(root, 'ci/base/packages.txt');
  const packagesText = fs.readFileSync(packagesFile, 'utf8');
  const packages = parsePackageList(packagesText, packagesFile);
  const base = baseTag(root, packagesText, fs.readFileSync(process.execPath));
  return withLock(log, async () => {
    if (await imageExists(base)) log(`images: reusing ${base}`);
    else {
      const t0 = Date.now();
      await buildBase(root, base, packages, log);
      log(`images: built ${base} in ${Math.round((Date.now() - t0) / 1000)} s`);
    }
    return { base, ...(await buildAppImages(root, base, log)) };
  });
}
