import { ApiStore } from '../../../sim/kube/store.js';
import { SimKubeApi } from '../../../sim/kube/sim-kube-api.js';
import { VirtualClock } from '../../../sim/time/virtual-clock.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { defineInformerContract } from './informer-contract.js';

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

defineInformerContract('sim adapter (virtual time)', async () => {
  const clock = new VirtualClock();
  const store = new ApiStore({ clock, random: new SeededRandom(1) });
  return {
    store,
    api: new SimKubeApi(store, clock),
    async until(cond, what) {
      for (let i = 0; i < 10_000; i++) {
        await flush();
        if (cond()) return;
        if (!clock.fireNext()) {
          await flush();
          if (cond()) return;
          throw new Error(`sim world went quiet before: ${what}`);
        }
      }
      throw new Error(`sim world did not reach: ${what}`);
    },
    async close() {},
  };
});
