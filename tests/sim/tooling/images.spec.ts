/**
 * The offline image builder's pure parts (tools/images-base.ts, tools/images-exec.ts): the
 * package list, the Debian mirror read from apt sources in both formats, and the input hash the
 * tags are made of. The package list is also checked against what the images need: the netns
 * world's tools (the node image plays a node) and each Dockerfile's install list, so the offline
 * builds install nothing. Building the images needs Docker and root: `npm run images`.
 */
import { test, expect } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { baseImageTag, machineMirror, mirrorFromAptSources, parsePackageList } from '../../../tools/images-base.js';
import { hashInputs } from '../../../tools/images-exec.js';
import { bundleCniPlugin } from '../../../tools/bundle-cni.js';
import { offlineImagesHostProblem } from '../../../tools/images.js';
import { containersWorld } from '../../worlds.js';
import { requiredPackages } from '../../../e2e/netns/required-tools.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const PACKAGES_FILE = path.join(ROOT, 'ci/base/packages.txt');

test('the package list: comments and blank lines dropped; a bad line is named with file and line', () => {
  expect(parsePackageList('# tools\niproute2\n\n  iptables  # rules\nlibstdc++6\n', 'p.txt')).toEqual([
    'iproute2',
    'iptables',
    'libstdc++6',
  ]);
  expect(() => parsePackageList('iproute2\nip tables\n', 'p.txt')).toThrow(
    /p\.txt:2: "ip tables" is not a Debian package name/,
  );
  expect(() => parsePackageList('# nothing\n\n', 'p.txt')).toThrow(/p\.txt: no package names/);
});

test("the base's packages cover the node image's tools and every Dockerfile's install list", () => {
  const base = new Set(parsePackageList(fs.readFileSync(PACKAGES_FILE, 'utf8'), PACKAGES_FILE));
  for (const p of requiredPackages()) expect(base, `netns tool package ${p}`).toContain(p);
  for (const name of ['node', 'agent', 'proxy']) {
    const dockerfile = fs.readFileSync(path.join(ROOT, `ci/${name}.Dockerfile`), 'utf8');
    // what each Dockerfile installs when its base lacks it (the public Node image does)
    const lists = [
      ...dockerfile.matchAll(/for p in ([a-z0-9+. -]+); do/g),
      ...dockerfile.matchAll(/install -y --no-install-recommends ([a-z0-9+. -]+?) &&/g),
    ];
    const wanted = lists.flatMap((m) => m[1]!.split(/\s+/)).filter((p) => p !== '' && !p.startsWith('$'));
    expect(wanted.length, `ci/${name}.Dockerfile installs something`).toBeGreaterThan(0);
    for (const p of wanted) expect(base, `ci/${name}.Dockerfile's ${p}`).toContain(p);
  }
  // what Node and the native addons link against (build/Release/*.node)
  for (const p of ['libstdc++6', 'libnghttp2-14', 'ca-certificates']) expect(base).toContain(p);
});

// this machine's own format (deb822, with the security archive and snapshot comments)
const DEB822 = `Types: deb
# http://snapshot.example/archive/debian-security/20250520T000000Z
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 -----END PGP PUBLIC KEY BLOCK-----
`;

test('the mirror from deb822 sources: the entry serving the suite with main, not the security archive', () => {
  expect(mirrorFromAptSources(DEB822, 'debian.sources')).toBe('http://mirror.example/debian');
  const disabled = DEB822.replace('Types: deb deb-src', 'Enabled: no\nTypes: deb deb-src');
  expect(mirrorFromAptSources(disabled, 'debian.sources')).toBeUndefined(); // only -security is left
  const trixie = 'Types: deb\nURIs: https://ftp.example/debian/\nSuites: trixie trixie-updates\nComponents: main\n';
  expect(mirrorFromAptSources(trixie, 'debian.sources')).toBe('https://ftp.example/debian/'); // same archive
  const noMain = 'Types: deb\nURIs: http://a.example/debian\nSuites: bookworm\nComponents: contrib\n';
  expect(mirrorFromAptSources(noMain, 'x.sources')).toBeUndefined();
  const srcOnly = 'Types: deb-src\nURIs: http://a.example/debian\nSuites: bookworm\nComponents: main\n';
  expect(mirrorFromAptSources(srcOnly, 'x.sources')).toBeUndefined();
});

test('the mirror from one-line sources: options, comments and deb-src lines handled', () => {
  const list = [
    '# deb http://commented.example/debian bookworm main',
    'deb-src http://src.example/debian bookworm main',
    'deb http://security.example/debian-security bookworm-security main',
    'deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://one.example/debian bookworm main non-free',
    'deb http://two.example/debian bookworm main',
  ].join('\n');
  expect(mirrorFromAptSources(list, 'sources.list')).toBe('http://one.example/debian');
  expect(mirrorFromAptSources('deb cdrom:[Debian]/ bookworm main\n', 'sources.list')).toBeUndefined();
  expect(mirrorFromAptSources('', 'sources.list')).toBeUndefined();
});

test("the machine's mirror: the first file with an entry; none names the files read and what to do", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-apt-'));
  try {
    const sources = path.join(dir, 'debian.sources');
    const list = path.join(dir, 'sources.list');
    const absent = path.join(dir, 'absent.sources');
    fs.writeFileSync(
      sources,
      'Types: deb\nURIs: http://security.example/d\nSuites: bookworm-security\nComponents: main\n',
    );
    fs.writeFileSync(list, 'deb http://list.example/debian bookworm main\n');
    expect(machineMirror([absent, sources, list])).toBe('http://list.example/debian');
    expect(() => machineMirror([absent, sources])).toThrow(
      new RegExp(`no Debian mirror for debootstrap: no "deb" entry .* in ${sources}; add this machine's Debian mirror`),
    );
    expect(() => machineMirror([absent])).toThrow(`none of ${absent} exists`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the input hash: stable, order-sensitive, and a label never runs into its value', () => {
  const h = hashInputs([
    ['a', 'x'],
    ['b', Buffer.from('y')],
  ]);
  expect(h).toMatch(/^[0-9a-f]{16}$/);
  expect(
    hashInputs([
      ['a', 'x'],
      ['b', 'y'],
    ]),
  ).toBe(h); // a string and its bytes are the same input
  expect(
    hashInputs([
      ['b', 'y'],
      ['a', 'x'],
    ]),
  ).not.toBe(h);
  expect(hashInputs([['a', 'bc']])).not.toBe(hashInputs([['ab', 'c']]));
  expect(hashInputs([['a', 'b\0c']])).not.toBe(hashInputs([['a\0b', 'c']]));
});

test('the base tag changes with each of its inputs and only with them', () => {
  const inputs = { packages: ['iproute2'], nodeVersion: 'v20.20.2', nodeBinarySha256: 'aa', builderSource: 'src' };
  const tag = baseImageTag(inputs);
  expect(tag).toMatch(/^ambient-lab\/base:[0-9a-f]{16}$/);
  expect(baseImageTag({ ...inputs })).toBe(tag);
  for (const [k, v] of Object.entries({
    packages: ['iproute2', 'iptables'],
    nodeVersion: 'v20.20.3',
    nodeBinarySha256: 'bb',
    builderSource: 'src2',
  }))
    expect(baseImageTag({ ...inputs, [k]: v }), k).not.toBe(tag);
});

test('the CNI payload: the bundle runs alone (no node_modules beside it), CommonJS dependencies included', async () => {
  // the bundle of the compiled plugin (npm test builds dist/ first), then only its two files elsewhere
  const entry = path.join(ROOT, 'dist/impl/linux/cni-plugin-main.js');
  expect(fs.existsSync(entry), `${entry}: run \`npm run build\` first`).toBe(true);
  const app = fs.mkdtempSync(path.join(os.tmpdir(), 'al-cni-app-'));
  const node = fs.mkdtempSync(path.join(os.tmpdir(), 'al-cni-node-'));
  try {
    fs.symlinkSync(path.join(ROOT, 'dist'), path.join(app, 'dist'));
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(app, 'node_modules'));
    await bundleCniPlugin(app);
    expect(fs.statSync(path.join(app, 'cni/ambient-lab-cni')).mode & 0o777).toBe(0o755);
    expect(fs.readFileSync(path.join(app, 'cni/ambient-lab-cni'), 'utf8')).toContain(
      'exec /opt/ambient-lab/node /opt/ambient-lab/ambient-lab-cni.mjs "$@"',
    );
    fs.copyFileSync(path.join(app, 'cni/ambient-lab-cni.mjs'), path.join(node, 'ambient-lab-cni.mjs'));
    const out = execFileSync(process.execPath, [path.join(node, 'ambient-lab-cni.mjs')], {
      input: '{}',
      env: { CNI_COMMAND: 'VERSION', PATH: process.env['PATH'] ?? '' },
      cwd: node,
    });
    expect((JSON.parse(out.toString()) as { supportedVersions: string[] }).supportedVersions).toContain('1.0.0');
  } finally {
    fs.rmSync(app, { recursive: true, force: true });
    fs.rmSync(node, { recursive: true, force: true });
  }
});

const BOOKWORM =
  'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_CODENAME=bookworm\nID=debian\n';
const NOBLE = 'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nNAME="Ubuntu"\nVERSION_CODENAME=noble\nID=ubuntu\nID_LIKE=debian\n';

test('the offline images need a Debian bookworm host; elsewhere the container world is skipped saying why', () => {
  expect(offlineImagesHostProblem(BOOKWORM)).toBeUndefined();
  expect(offlineImagesHostProblem(BOOKWORM.replace('ID=debian', 'ID="debian"'))).toBeUndefined();
  expect(offlineImagesHostProblem(NOBLE)).toMatch(
    /need a Debian bookworm host .*; this is Ubuntu 24\.04\.1 LTS: build the images with network from ci\/build\.Dockerfile/,
  );
  expect(offlineImagesHostProblem(BOOKWORM.replace(/bookworm/g, 'trixie'))).toContain('Debian GNU/Linux 12 (trixie)');
  expect(offlineImagesHostProblem('')).toContain('a machine without /etc/os-release');
  expect(containersWorld({}, NOBLE)).toMatchObject({
    available: false,
    reason: expect.stringContaining('Ubuntu 24.04.1 LTS'),
  });
  // what .ci/run found out comes first
  expect(containersWorld({ AMBIENT_LAB_DOCKER: 'unavailable: dockerd did not answer' }, BOOKWORM)).toEqual({
    available: false,
    reason: 'container world: unavailable: dockerd did not answer',
  });
});
