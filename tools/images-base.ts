/**
 * The base image of every offline image (issue #17 item 2): a `debootstrap --variant=minbase`
 * Debian rootfs with the packages of ci/base/packages.txt installed into it (so no image build
 * after it needs the network) and the running Node.js 20 binary at /usr/local/bin/node (where
 * node:20-bookworm-slim keeps it, which the Dockerfiles and the manifests' `--payload` expect),
 * imported with `docker import` as `ambient-lab/base:<hash of its inputs>`. The mirror is read from
 * this machine's apt sources at run time, never from the repository.
 *
 * This file and tools/images-exec.ts are hashed into the tag, so a change here rebuilds the base;
 * what is built FROM it lives in tools/images.ts, which does not.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { hashInputs, imageExists, mustRun, pipe, run } from './images-exec.js';

/** The Debian release the images are built from (node:20-bookworm-slim's, so both bases agree). */
const SUITE = 'bookworm';
/** The apt sources this machine may have; the first with a usable entry gives the mirror. */
const APT_SOURCES = ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list'];
const PATH_ENV = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** The base's own sources, relative to the repository root: inputs of its tag. */
const BUILDER_SOURCES = ['tools/images-base.ts', 'tools/images-exec.ts'];

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

/** What the base image is made of; its tag is a hash of all of it. */
interface BaseInputs {
  /** The packages of ci/base/packages.txt, in its order (its comments do not change the image). */
  readonly packages: readonly string[];
  readonly nodeVersion: string;
  /** sha256 of the Node binary copied in (a rebuilt node of the same version is another input). */
  readonly nodeBinarySha256: string;
  /** tools/images-base.ts and tools/images-exec.ts: how the rootfs is made is an input too. */
  readonly builderSource: string | Buffer;
}

/** `ambient-lab/base:<hash>` over the suite, the variant and every BaseInputs field. */
export function baseImageTag(i: BaseInputs): string {
  const hash = hashInputs([
    ['suite', SUITE],
    ['variant', 'minbase'],
    ['packages', i.packages.join('\n')],
    ['node-version', i.nodeVersion],
    ['node-binary', i.nodeBinarySha256],
    ['builder', i.builderSource],
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

async function buildBase(tag: string, packages: readonly string[], log: (l: string) => void): Promise<void> {
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
 * Builds the base image unless an image with its tag exists; returns the tag. Needs root and
 * debootstrap only when it builds.
 */
export async function ensureBaseImage(root: string, log: (l: string) => void): Promise<string> {
  const packagesFile = path.join(root, 'ci/base/packages.txt');
  const packages = parsePackageList(fs.readFileSync(packagesFile, 'utf8'), packagesFile);
  const tag = baseImageTag({
    packages,
    nodeVersion: process.version,
    nodeBinarySha256: createHash('sha256').update(fs.readFileSync(process.execPath)).digest('hex'),
    builderSource: Buffer.concat(BUILDER_SOURCES.map((f) => fs.readFileSync(path.join(root, f)))),
  });
  if (await imageExists(tag)) {
    log(`images: reusing ${tag}`);
    return tag;
  }
  const t0 = Date.now();
  await buildBase(tag, packages, log);
  log(`images: built ${tag} in ${Math.round((Date.now() - t0) / 1000)} s`);
  return tag;
}
