#!/usr/bin/env node
// Builds the native addons (binding.gyp -> build/Release/ambient_lab_sockets.node, ambient_lab_packet.node and,
// when nghttp2's header is installed, ambient_lab_hbone.node) during
// `npm install` / `npm ci`. Plain JavaScript because it runs before `prepare` compiles the
// TypeScript. It checks for the build tools first so a missing one is named, not buried in
// node-gyp output, and it fails the install when the build fails.
//
// Skips (exit 0, with a message): on a non-Linux platform (the addon is Linux-only), or when
// AMBIENT_LAB_SKIP_NATIVE=1 (sim-only installs; the netns world then cannot run).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const TAG = '[ambient-lab native]';
const say = (msg) => console.error(`${TAG} ${msg}`);

if (process.platform !== 'linux') {
  say(
    `skipped: the socket addon is Linux-only (this is ${process.platform}); the sim world works without it, the netns world needs Linux.`,
  );
  process.exit(0);
}
if (process.env.AMBIENT_LAB_SKIP_NATIVE === '1') {
  say(
    'skipped because AMBIENT_LAB_SKIP_NATIVE=1; impl/linux sockets and the netns world will not work until `npm install` builds it.',
  );
  process.exit(0);
}

function works(cmd, args = ['--version']) {
  const r = spawnSync(cmd, args, { stdio: 'ignore' });
  return r.error === undefined && r.status === 0;
}

const python = process.env.PYTHON || process.env.npm_config_python || 'python3';
const cxx = process.env.CXX || 'g++';
const missing = [];
if (!works(python)) missing.push(`${python} (Python 3, for node-gyp)`);
if (!works('make')) missing.push('make');
if (!works(cxx)) missing.push(`${cxx} (a C++17 compiler; set CXX to use another)`);
if (missing.length > 0) {
  say(`cannot build the native socket addon: missing build tools: ${missing.join(', ')}.`);
  say('Install them (Debian/Ubuntu: `apt-get install -y python3 make g++`) and run `npm install` again,');
  say('or set AMBIENT_LAB_SKIP_NATIVE=1 to install without the addon (sim world only).');
  process.exit(1);
}

// npm puts its bundled node-gyp in npm_config_node_gyp for lifecycle scripts; outside npm, use
// the copy shipped with the npm next to this node.
const npmBundled = resolve(
  dirname(process.execPath),
  '..',
  'lib',
  'node_modules',
  'npm',
  'node_modules',
  'node-gyp',
  'bin',
  'node-gyp.js',
);
const gyp = process.env.npm_config_node_gyp || npmBundled;
if (!existsSync(gyp)) {
  say(
    `cannot build the native socket addon: node-gyp not found (looked at ${gyp}); run the build through \`npm install\`.`,
  );
  process.exit(1);
}

// Use the headers installed with this node (e.g. /usr/include/node) when present, so the build
// works offline instead of downloading a headers tarball.
const args = [gyp, 'rebuild'];
const prefix = resolve(dirname(process.execPath), '..');
if (!process.env.npm_config_nodedir && existsSync(join(prefix, 'include', 'node', 'common.gypi'))) {
  args.push(`--nodedir=${prefix}`);
}
const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
if (r.error !== undefined || r.status !== 0) {
  say(
    `building the native socket addon failed (node-gyp ${r.error ? r.error.message : `exit ${r.status ?? r.signal}`}); see the compiler output above.`,
  );
  say(
    'It needs python3, make, a C++17 compiler and the Node.js headers (package nodejs headers, or network access for node-gyp to fetch them).',
  );
  process.exit(1);
}
say('built build/Release/ambient_lab_sockets.node and build/Release/ambient_lab_packet.node');
if (existsSync(join('build', 'Release', 'ambient_lab_hbone.node'))) {
  say('built build/Release/ambient_lab_hbone.node (the native HBONE tunnel)');
} else {
  say(
    'not built: the native HBONE tunnel (no /usr/include/nghttp2/nghttp2.h; Debian: apt-get install -y libnghttp2-dev, then npm install again). The proxy uses node:tls + node:http2 without it.',
  );
}
