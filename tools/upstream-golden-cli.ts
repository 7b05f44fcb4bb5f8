/**
 * `node dist/tools/upstream-golden-cli.js`: compare istio-cni's golden rule files
 * (fixtures/upstream-golden/) with our `upstream` profile on the real kernel (root; private
 * network namespaces only). Exit 0: every rule set identical; 1: some differ (printed);
 * 3: the comparison could not run (not root, a tool failing).
 */
import { CASES, NOT_EXPRESSIBLE, compareAll } from './upstream-golden.js';

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    console.error('upstream-golden: needs root (it creates private network namespaces and loads rules there)');
    return 3;
  }
  const results = await compareAll(CASES, (l) => console.log(l));
  for (const n of NOT_EXPRESSIBLE) console.log(`not compared  ${n.file}: ${n.reason}`);
  const differing = results.filter((r) => r.differences.length > 0);
  for (const r of differing) {
    console.log(`\n${r.file} ${r.family}:`);
    for (const d of r.differences) console.log(`  ${d}`);
  }
  console.log(
    `\n${results.length} rule set(s) from ${CASES.length} golden file(s): ${results.length - differing.length} identical, ${differing.length} different; ${NOT_EXPRESSIBLE.length} file(s) not expressible`,
  );
  return differing.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(`upstream-golden: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(3);
  },
);
