/**
 * `npm run images` (node dist/tools/build-images.js): builds, or reuses, the offline images (base,
 * node, agent, proxy; tools/images.ts) and prints their tags on stdout as `NAME=TAG` lines, so a
 * shell can `eval` them; progress goes to stderr. Exit 1 with the reason when a build fails or
 * Docker/debootstrap is missing.
 */
import { buildLocalImages } from './images.js';

if (process.argv.length > 2) {
  console.error(`build-images: takes no arguments, got ${process.argv.slice(2).join(' ')}; usage: build-images`);
  process.exit(2);
}
const t0 = Date.now();
try {
  const tags = await buildLocalImages({ log: (l) => console.error(l) });
  for (const [name, tag] of Object.entries(tags)) console.log(`${name}=${tag}`);
  console.error(`images: ready in ${Math.round((Date.now() - t0) / 1000)} s`);
} catch (e) {
  console.error(`build-images: ${(e as Error).message}`);
  process.exit(1);
}
