/**
 * Offline images (issue #17 items 2 and 6): builds, or reuses, the base, node, agent and proxy
 * images on a machine with a Docker daemon and no container registry.
 *
 * - base (`ambient-lab/base:<hash>`): a debootstrap rootfs with every package and Node 20
 *   (tools/images-base.ts).
 * - build (`ambient-lab/build:<hash>`): not a build at all but the host's tree in /app, staged from
 *   what `npm ci` already made here (production node_modules, the native addons) plus a fresh
 *   `tsc` of the runtime sources (not tests/, bench/) and the esbuild bundle of the CNI plugin — what ci/build.Dockerfile does with network.
 * - node, agent, proxy, ca: ci/<name>.Dockerfile FROM the base, copying from that build image;
 *   `docker build --network none`, so an image that would need the network fails to build.
 *
 * Every tag is a hash of that image's inputs, so an existing tag is reused without rebuilding
 * (the images are the cache). Old tags stay until asked: pruneLocalImages (`npm run images --
 * --prune`) removes every ambient-lab image but the current ones.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleCniPlugin } from './bundle-cni.js';
import { ensureBaseImage } from './images-base.js';
import { hashInputs, imageExists, mustRun, pipe, run } from './images-exec.js';

/** The images built FROM the base, each from ci/<name>.Dockerfile. */
const APP_IMAGES = ['node', 'agent', 'proxy', 'ca'] as const;
/**
 * What is compiled into the build image: the runtime code, not tests/ or bench/ (nothing in these
 * imports them, and a test edit should not rebuild the images).
 */
const APP_SOURCES = ['impl', 'sim', 'scenarios', 'e2e', 'cli', 'tools'];
/**
 * The build image's inputs: a change in any file under these changes the app images' tags. Docs,
 * fixtures and CI files do not go into an image.
 */
const APP_INPUTS = ['package.json', 'package-lock.json', 'tsconfig.json', 'binding.gyp', 'bin', ...APP_SOURCES];

interface LocalImageTags {
  readonly base: string;
  readonly node: string;
  readonly agent: string;
  readonly proxy: string;
  readonly ca: string;
}

interface BuildImagesOptions {
  /** Progress lines (what is built or reused, and how long it took). */
  readonly log?: (line: string) => void;
  /** The repository root; found from this file's location when absent. */
  readonly repoRoot?: string;
}

/**
 * Why this machine cannot build the offline images, from its /etc/os-release; undefined when it
 * can. The build image carries the native addons compiled here, which need a glibc no newer than
 * the base's (Debian bookworm), and the base is debootstrapped from this machine's Debian mirror:
 * so the host must be Debian bookworm itself.
 */
export function offlineImagesHostProblem(osRelease: string): string | undefined {
  const field = (k: string): string | undefined => new RegExp(`^${k}=("?)(.*)\\1$`, 'm').exec(osRelease)?.[2];
  if (field('ID') === 'debian' && field('VERSION_CODENAME') === 'bookworm') return undefined;
  return `the offline images need a Debian bookworm host (the native addons built here go into a bookworm image, and the base comes from this machine's Debian mirror); this is ${field('PRETTY_NAME') ?? 'a machine without /etc/os-release'}: build the images with network from ci/build.Dockerfile instead (ci/README.md)`;
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
  // the repository's compiler options, only the runtime sources (APP_SOURCES), into the stage
  const tsconfig = path.join(stage, 'tsconfig.json');
  fs.writeFileSync(
    tsconfig,
    JSON.stringify({
      extends: path.join(root, 'tsconfig.json'),
      // typeRoots: @types/node is found from the config's directory, which is the stage's here
      compilerOptions: {
        rootDir: root,
        outDir: path.join(app, 'dist'),
        sourceMap: false,
        typeRoots: [path.join(root, 'node_modules/@types')],
      },
      include: APP_SOURCES.map((d) => path.join(root, d)),
    }),
  );
  await mustRun(
    process.execPath,
    [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', tsconfig],
    'compiling the TypeScript for the images',
    { cwd: root },
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
  // bundled after the copy: esbuild resolves the plugin's imports (yaml, ...) from the staged node_modules
  await bundleCniPlugin(app);
}

async function buildAppImages(
  root: string,
  base: string,
  log: (l: string) => void,
): Promise<{ readonly node: string; readonly agent: string; readonly proxy: string; readonly ca: string }> {
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
 * Builds what is missing of base → node, agent, proxy, ca, offline, and returns the five tags. Throws
 * naming the Debian package when Docker or debootstrap is missing.
 */
export async function buildLocalImages(opts: BuildImagesOptions = {}): Promise<LocalImageTags> {
  const log = opts.log ?? ((): void => {});
  const root = opts.repoRoot ?? findRepoRoot();
  if (!process.version.startsWith('v20.'))
    throw new Error(
      `the images carry the running Node.js binary and must have Node 20; this is ${process.version} (${process.execPath}): run the build with Node 20`,
    );
  let osRelease = '';
  try {
    osRelease = fs.readFileSync('/etc/os-release', 'utf8');
  } catch {
    // no os-release: reported as such below
  }
  const hostProblem = offlineImagesHostProblem(osRelease);
  if (hostProblem) throw new Error(hostProblem);
  await requireDocker();
  return withLock(log, async () => {
    const base = await ensureBaseImage(root, log);
    return { base, ...(await buildAppImages(root, base, log)) };
  });
}

/** The repositories of the images this file builds (pruneLocalImages removes only these). */
const OUR_REPOSITORIES = ['base', 'build', ...APP_IMAGES].map((n) => `ambient-lab/${n}`);

/**
 * Removes every image of OUR_REPOSITORIES whose tag is not one of `keep` (the build image goes
 * too: the app images only copy from it, and it is staged again, ≈ 45 s, when an app image must be
 * rebuilt). An image a container still uses is kept, and said so. Other worktrees' images are
 * removed as well: their next run rebuilds them (about a minute on a cached base; the base takes
 * minutes, so it is kept as long as `keep` names it). Returns the removed and the kept-in-use tags.
 */
export async function pruneLocalImages(
  keep: LocalImageTags,
  log: (line: string) => void = (): void => {},
): Promise<{ removed: string[]; inUse: string[] }> {
  await requireDocker();
  const listed = await mustRun(
    'docker',
    ['image', 'ls', '--format', '{{.Repository}}:{{.Tag}}'],
    'listing the local images to prune',
  );
  const current = new Set<string>(Object.values(keep));
  const stale = listed
    .split('\n')
    .map((l) => l.trim())
    .filter((t) => OUR_REPOSITORIES.includes(t.split(':')[0]!) && !t.endsWith(':<none>') && !current.has(t));
  // Children before parents: the app images, then the build images they copy from, then bases.
  const order = (t: string): number =>
    t.startsWith('ambient-lab/base:') ? 2 : t.startsWith('ambient-lab/build:') ? 1 : 0;
  stale.sort((a, b) => order(a) - order(b));
  const removed: string[] = [];
  const inUse: string[] = [];
  for (const tag of stale) {
    const r = await run('docker', ['image', 'rm', tag]);
    if (r.code === 0) removed.push(tag);
    else if (/being used by|is using its referenced image|has dependent child images/.test(r.stderr)) inUse.push(tag);
    else throw new Error(`removing the image ${tag}: \`docker image rm ${tag}\` exited ${r.code}: ${r.stderr.trim()}`);
  }
  log(
    `images: pruned ${removed.length} old tag(s)${inUse.length ? `; kept ${inUse.length} in use: ${inUse.join(', ')}` : ''}`,
  );
  return { removed, inUse };
}
