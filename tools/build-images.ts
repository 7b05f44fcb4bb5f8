/**
 * `npm run images` (node dist/tools/build-images.js [--prune]): builds, or reuses, the offline
 * images (base, node, agent, proxy, ca; tools/images.ts) and prints their tags on stdout as `NAME=TAG`
 * lines, so a shell can `eval` them; progress goes to stderr. With --prune it then removes every
 * other ambient-lab image (old tags pile up: each runtime change makes new ones, ≈ 500 MB). Exit 1
 * with the reason when a build or removal fails or Docker/debootstrap is missing; 2 on a bad flag.
 */
import { buildLocalImages, pruneLocalImages } from './images.js';

const args = process.argv.slice(2);
if (args.length > 1 || (args.length === 1 && args[0] !== '--prune')) {
  console.error(`build-images: unknown arguments ${args.join(' ')}; usage: build-images [--prune]`);
  process.exit(2);
}
const t0 = Date.now();
try {
  const log = (l: string): void => console.error(l);
  const tags = await buildLocalImages({ log });
  if (args[0] === '--prune') await pruneLocalImages(tags, log);
  for (const [name, tag] of Object.entries(tags)) console.log(`${name}=${tag}`);
  console.error(`images: ready in ${Math.round((Date.now() - t0) / 1000)} s`);
} catch (e) {
  console.error(`build-images: ${(e as Error).message}`);
  process.exit(1);
}
