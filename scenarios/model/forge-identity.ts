/**
 * A compromised node in a random history (World.forgedHbone): root on a node — a threat whose
 * host attacker runs as uid 0 — asks for the identity of a namespace's `default` service account
 * with one of the credentials it can have, and opens HBONE with it to a pod. The CA grants it
 * exactly when a pod of that namespace runs on the node (then the node holds it, and the identity
 * property says so); otherwise the CA must refuse, and a self-signed certificate must be refused
 * by the destination's proxy. Histories move pods, delete them, reboot nodes and stop proxies
 * around it, which the catalog's fixed topology does not. Judged as every connection.
 */
import { IDENTITY_CREDENTIALS, podKey, type Destination, type Source } from '../world.js';
import { APP_PORTS, type ModelCommand } from './commands.js';
import { pickNamespace, pickPod, type ClusterModel } from './model.js';
import { checkAttempt, record, type RunContext } from './run-context.js';

interface ForgeShape {
  readonly nodeIndex: number;
  /** Whose identity: the default service account of the model's namespace at this index. */
  readonly nsIndex: number;
  readonly credentialIndex: number;
  readonly toIndex: number;
  readonly port: (typeof APP_PORTS)[number];
}

export class ForgeIdentity implements ModelCommand {
  private resolved = '?';

  constructor(readonly shape: ForgeShape) {}

  check(m: Readonly<ClusterModel>): boolean {
    return m.threat.hostAttacker && m.threat.uids.includes(0) && m.pods.size > 0 && m.namespaces.size > 0;
  }

  async run(m: ClusterModel, r: RunContext): Promise<void> {
    const credential = IDENTITY_CREDENTIALS[this.shape.credentialIndex % IDENTITY_CREDENTIALS.length]!;
    const node = m.nodes[this.shape.nodeIndex % m.nodes.length];
    const ns = pickNamespace(m, this.shape.nsIndex);
    const dst = pickPod(m, this.shape.toIndex, (p) => p.started && !p.hostNetwork);
    if (node === undefined || ns === undefined || !dst) return;
    const identity = `spiffe://cluster.local/ns/${ns}/sa/default`;
    this.resolved = `host@${node} uid 0 as ${identity} (${credential}) -> ${podKey(dst.ref)}:${this.shape.port}`;
    if (!r.world.forgedHbone) {
      record(r, this.toString(), 'skipped: the world has no forgedHbone');
      return;
    }
    if (!(r.world.forgeableCredentials ?? []).includes(credential)) {
      record(r, this.toString(), `skipped: the world cannot present the ${credential}`);
      return;
    }
    const from: Source = { kind: 'host', node, uid: 0, caps: [] };
    const to: Destination = { kind: 'pod', pod: dst.ref, port: this.shape.port };
    const result = await r.world.forgedHbone(node, identity, credential, to);
    record(
      r,
      this.toString(),
      `certificate ${result.certificate.kind}; ${result.outcome}${result.error ? ` (${result.error})` : ''}` +
        `${result.deliveries.length ? ` delivered to ${result.deliveries.map((d) => `${podKey(d.pod)}:${d.port}`).join(', ')}` : ''}`,
    );
    await checkAttempt(r, m, { from, to, opts: {}, result });
  }

  toString(): string {
    return `ForgeIdentity(${this.resolved})`;
  }
}
