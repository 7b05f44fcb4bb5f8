import { KubeConfig } from '@kubernetes/client-node';
import { ApiStore } from '../../../sim/kube/store.js';
import { facadeKubeconfig, startKubeApiFacade } from '../../../sim/kube/http-facade.js';
import { ClientNodeKubeApi } from '../../../impl/linux/kube-client-node.js';
import { SystemClock } from '../../../impl/linux/clock.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { defineInformerContract } from './informer-contract.js';

defineInformerContract('client-node adapter over the HTTP facade (real time, loopback)', async () => {
  const store = new ApiStore({ clock: new SystemClock(), random: new SeededRandom(1) });
  const facade = await startKubeApiFacade(store);
  const kc = new KubeConfig();
  kc.loadFromString(facadeKubeconfig(facade.url));
  return {
    store,
    api: new ClientNodeKubeApi(kc),
    async until(cond, what) {
      for (let i = 0; i < 500; i++) {
        if (cond()) return;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`timed out waiting for: ${what}`);
    },
    close: () => facade.close(),
  };
});
