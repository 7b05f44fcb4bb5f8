/**
 * The mesh CA's view of pods (impl/mesh-ca/node-authorizer.ts PodView) over the sim API store,
 * as the CA process gets it from its pod informer: in-process CAs in tests and benches use it.
 * `ignoreNode` is a mutant for positive controls: every pod counts as on the caller's node.
 */
import { podFacts, type PodView } from '../../impl/mesh-ca/node-authorizer.js';
import type { ApiStore } from './store.js';

export function storePodView(store: ApiStore, opts: { readonly ignoreNode?: boolean } = {}): PodView {
  return {
    get: (ns, name) => {
      const p = store.list('Pod', { namespace: ns }).items.find((x) => x.metadata?.name === name);
      return p && podFacts(p);
    },
    onNode: (node) =>
      store.list('Pod', opts.ignoreNode ? {} : { fieldSelector: `spec.nodeName=${node}` }).items.map(podFacts),
  };
}
