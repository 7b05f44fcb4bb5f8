/**
 * The expected verdict of every (property × threat × profile × backend) cell, derived from the known
 * bypass classes and upstream findings (docs/bypass-classes.md) and profiles.ts — NOT from
 * running the checks. The matrix fails when reality differs in either direction: a bypass the
 * table does not expect is an unexpected bypass; an expected bypass not found means the
 * property or the attack is too weak.
 *
 * Vacuous cells (the attacker cannot send from an enrolled pod, so outbound capture has nothing
 * to judge) are 'holds' with the reason saying so.
 *
 * The carve-outs (scenarios/properties/carve-outs.ts) apply in every cell alike, so no cell
 * lists them: a 'holds' means "no bypass besides the named carve-outs". In particular the
 * strict inbound and authorization rows hold for hosts, other nodes and outside clients except
 * for a pod whose owner chose ingress mode (its TCP inbound is not captured by design) and the
 * windows that close at the next settle (pending enrollment, policy propagation).
 */
import type { Backend } from '../../impl/api/backend.js';
import type { Profile } from '../world.js';
import { PROPERTY_NAMES, type PropertyName } from '../properties/types.js';
import { THREATS, canSetTransparent, type ThreatId } from '../threats/threats.js';

export type BypassClass =
  | 'B1'
  | 'B2'
  | 'B3'
  | 'B4'
  | 'B5'
  | 'B7'
  | 'B8'
  | 'B11'
  | 'B12'
  | 'B14'
  | 'B15'
  | `finding-${'a' | 'b' | 'c' | 'h' | 'j' | 'k' | 'l' | 'm' | 'n' | 'p' | 'q'}`;

export type ExpectedCell =
  | { readonly verdict: 'holds'; readonly why: string }
  | {
      readonly verdict: 'bypass';
      readonly classes: readonly BypassClass[];
      readonly why: string;
      /** The attack needs a World capability that may be missing (then the cell is reported as not evaluated). */
      readonly requires?: 'appExec';
    };

type Row = Readonly<Record<Profile, ExpectedCell>>;

const holds = (why: string): ExpectedCell => ({ verdict: 'holds', why });
const bypass = (classes: BypassClass[], why: string, requires?: 'appExec'): ExpectedCell => ({
  verdict: 'bypass',
  classes,
  why,
  ...(requires ? { requires } : {}),
});

const UDP_OUT = bypass(
  ['B8'],
  'upstream redirects only TCP (+DNS): app UDP to a non-53 port leaves uncaptured (finding-i)',
);
const UDP_IN = bypass(
  ['B8'],
  'upstream lets non-TCP into the pod untouched: UDP reaches the app without the proxy (finding-i)',
);
const RAW = bypass(
  ['B4'],
  'AF_PACKET frames skip the IP-layer netfilter hooks of the pod netns; no in-pod rule can see them (B4) — strict residual',
);
const FLUSH = bypass(
  ['B3'],
  'NET_ADMIN in the pod netns flushes the redirection rules (B3); strict cannot prevent it in-pod — residual',
  'appExec',
);
const STRICT_UDP = 'strict drops non-TCP both ways (non-tcp-fail-closed)';
const VACUOUS_OUT = 'vacuous: the attacker sends from no enrolled pod';

function row(upstream: ExpectedCell, strict: ExpectedCell): Row {
  return { upstream, strict };
}

/** EXPECTED[property][threat][profile]. */
const EXPECTED: Readonly<Record<PropertyName, Readonly<Record<ThreatId, Row>>>> = {
  'outbound-capture': {
    'app-nonroot': row(UDP_OUT, holds(`TCP is redirected to 15001; ${STRICT_UDP}`)),
    'app-root': row(UDP_OUT, holds(`uid 0 without capabilities cannot set SO_MARK or touch rules; ${STRICT_UDP}`)),
    'app-net-raw-5.15': row(bypass(['B4', 'B8'], 'AF_PACKET and UDP skip capture (SO_MARK is EPERM before 5.17)'), RAW),
    'app-net-raw-6.1': row(
      bypass(
        ['B4', 'B8', 'finding-j'],
        'SO_MARK 0x539 (NET_RAW is enough since 5.17) skips the 15001 redirect; AF_PACKET and UDP too',
      ),
      RAW,
    ),
    'app-net-admin': row(
      bypass(['B3', 'finding-j', 'B8'], 'SO_MARK 0x539 skips the redirect; flushing the rules skips everything'),
      FLUSH,
    ),
    'app-proxy-uid-net-raw': row(
      UDP_OUT,
      holds(
        "the proxy uid alone is not enough: the mark needs a capability, and a non-root container has no effective capabilities (k8s#56374). The attacker's uid comes from its image (a pod declaring runAsUser 1337 is refused by the strict agent, proxy-uid-pods.ts). Residual B1 (proxy uid + file capability CAP_NET_RAW) is not modelled by the sim",
      ),
    ),
    'host-process': row(holds(VACUOUS_OUT), holds(VACUOUS_OUT)),
    'host-root': row(holds(VACUOUS_OUT), holds(VACUOUS_OUT)),
    'other-node': row(holds(VACUOUS_OUT), holds(VACUOUS_OUT)),
    outside: row(holds(VACUOUS_OUT), holds(VACUOUS_OUT)),
  },
  'inbound-capture': {
    'app-nonroot': row(UDP_IN, holds(`TCP is redirected to 15006 at the victim; ${STRICT_UDP}`)),
    'app-root': row(UDP_IN, holds(`as non-root; ${STRICT_UDP}`)),
    'app-net-raw-5.15': row(
      UDP_IN,
      holds(`raw frames arrive through the victim's PREROUTING like any packet and are redirected; ${STRICT_UDP}`),
    ),
    'app-net-raw-6.1': row(
      UDP_IN,
      holds(
        `marks do not cross the wire, so a spoofed mark does not skip the victim's inbound redirect (finding-j); ${STRICT_UDP}`,
      ),
    ),
    'app-net-admin': row(
      bypass(['B3', 'B8'], "the app flushes its own pod's inbound redirect, exposing itself; UDP too", 'appExec'),
      FLUSH,
    ),
    'app-proxy-uid-net-raw': row(UDP_IN, holds(`as NET_RAW; ${STRICT_UDP}`)),
    'host-process': row(
      bypass(
        ['B12', 'finding-k', 'B8'],
        'upstream SNATs every host socket (--socket-exists) to 169.254.7.127 and accepts it on any port',
      ),
      holds(
        'strict SNATs only the kubelet uid and accepts only declared probe ports (probe-ports, host-probe-kubelet-uid)',
      ),
    ),
    'host-root': row(
      bypass(['B8'], 'TCP from the kubelet uid is the documented probe carve-out; host UDP reaches the app'),
      holds(
        `root to an undeclared port is policed; root to a declared probe port is the carve-out (residual: indistinguishable from the kubelet); ${STRICT_UDP}`,
      ),
    ),
    'other-node': row(UDP_IN, holds(`cross-node TCP is redirected to 15006; ${STRICT_UDP}`)),
    outside: row(UDP_IN, holds(`routed TCP is redirected to 15006; ${STRICT_UDP}`)),
  },
  authorization: {} as Record<ThreatId, Row>,
  identity: {} as Record<ThreatId, Row>,
  'fail-closed': {} as Record<ThreatId, Row>,
  convergence: {} as Record<ThreatId, Row>,
  liveness: {} as Record<ThreatId, Row>,
};

// Authorization: a delivery that skipped the proxy was authorized by nobody, so its row is the
// inbound row; where inbound holds, the destination proxy enforces the policy (a spoofed mark
// arrives as plaintext without identity and is denied; docs/bypass-classes.md#finding-j).
const mutable = EXPECTED as Record<PropertyName, Record<ThreatId, Row>>;
for (const t of THREATS) {
  const inbound = EXPECTED['inbound-capture'][t.id];
  const outbound = EXPECTED['outbound-capture'][t.id];
  mutable.authorization[t.id] = {
    upstream:
      inbound.upstream.verdict === 'bypass'
        ? { ...inbound.upstream, why: `unauthorized delivery: ${inbound.upstream.why}` }
        : holds('the destination proxy enforces the policy in force'),
    strict:
      inbound.strict.verdict === 'bypass'
        ? { ...inbound.strict, why: `unauthorized delivery: ${inbound.strict.why}` }
        : holds('the destination proxy enforces the policy in force'),
  };
  // Fail closed: the same attacks with the proxy (and then the agent) of the attacker's and the
  // victim's node down. Rules stay in place (findings d and e, docs/bypass-classes.md), so TCP fails; whatever bypassed the
  // rules while healthy still bypasses.
  const failClosed = (p: Profile): ExpectedCell => {
    const o = outbound[p];
    const i = inbound[p];
    if (o.verdict === 'bypass') return { ...o, why: `with the proxy down: ${o.why}` };
    if (i.verdict === 'bypass') return { ...i, why: `with the proxy down: ${i.why}` };
    return holds(
      'rules stay while the proxy or agent is down: redirected TCP is refused; new ambient pods wait for the agent',
    );
  };
  mutable['fail-closed'][t.id] = { upstream: failClosed('upstream'), strict: failClosed('strict') };
  // Identity: the CA is the same in both profiles, and so is the HBONE peer check. Only a
  // compromised node tries to hold more than it does (catalog forged-identity, host-root).
  const identityWhy =
    t.id === 'host-root'
      ? "the mesh CA grants root on the victim's node only the identities of that node's pods (node authorization: its proxy's token, a pod of the identity on the caller's node), refuses an expired, replayed or wrong-audience token, and the destination proxy refuses a certificate of another root (docs/mesh-identity.md)"
      : 'an identity reaches a peer only in a certificate from the mesh CA, which this attacker cannot ask for: its proxy presents each pod as itself';
  mutable.identity[t.id] = row(holds(identityWhy), holds(identityWhy));
  mutable.convergence[t.id] = row(
    holds("attacker actions do not change labels; the agent's repair loop restores tampered rules before quiescence"),
    holds("attacker actions do not change labels; the agent's repair loop restores tampered rules before quiescence"),
  );
  mutable.liveness[t.id] = row(
    holds('plain TCP between enrolled pods under allow-all is carried with identities'),
    holds('plain TCP between enrolled pods under allow-all is carried with identities; strict only drops non-TCP'),
  );
}

// NET_ADMIN inserts an ACCEPT ahead of the capture once and stops (catalog net-admin-insert,
// phase inserted-accept): upstream's repair never looks outside its own chains and hooks, so the
// pod stays uncaptured after the settle; strict (exclusive-tables) repairs it.
mutable.convergence['app-net-admin'] = row(
  bypass(
    ['B3', 'B14'],
    "an ACCEPT the app inserts ahead of the hook in nat OUTPUT outlives every repair pass: the agent only checks the plan's own chains and hooks",
    'appExec',
  ),
  holds(
    "exclusive-tables: the repair pass treats anything else in the plan's tables as drift and restores them whole before quiescence",
  ),
);

// Port hijack (docs/bypass-classes.md#finding-l), measured in the matrix's port-hijack phase: the node proxy of the
// attacker's node stops, the app binds 15001 and 15006 in its own netns (no privilege needed:
// ports >= 1024; as root with SO_REUSEPORT too; with IP_TRANSPARENT when it has NET_RAW or
// NET_ADMIN), the proxy comes back and cannot bind them (the sim proxy runs as uid 1337, so even
// a root app's reuseport socket keeps it out: EADDRINUSE). Upstream redirects inbound plaintext
// to the app's own 15006 (nat REDIRECT takes any socket): delivered without the proxy and without
// any authorization, for every enrolled-pod threat. Strict captures inbound with TPROXY
// (inbound-tproxy), which hands packets only to a transparent socket and drops them otherwise:
// the hijack fails closed unless the app could make its listener transparent. It harms only the
// hijacking pod's own inbound policy; the victim's capture is untouched. Applied after the
// derivations above on purpose: the hijack happens with every component up, so it says nothing
// about fail closed.
const HIJACK_WHY =
  "port hijack: with its node proxy stopped the app binds 15006/15001 in its own netns (no capability needed), the restarted proxy gets EADDRINUSE, and inbound plaintext to the pod reaches the app's 15006 socket without the proxy or any authorization (finding l; nothing reserves the ports in either profile)";
const HIJACK_TRANSPARENT_WHY =
  "port hijack with IP_TRANSPARENT: with its node proxy stopped the app, whose NET_RAW/NET_ADMIN allows IP_TRANSPARENT, binds a transparent listener on 15006 in its own netns, the restarted proxy gets EADDRINUSE, and strict's TPROXY hands inbound plaintext to that listener without the proxy or any authorization (finding l; only admission without NET_RAW/NET_ADMIN or a bind guard on the proxy ports closes it)";
for (const t of THREATS) {
  if (t.vantage !== 'enrolled-pod') continue;
  for (const prop of ['inbound-capture', 'authorization'] as const) {
    for (const prof of ['upstream', 'strict'] as const) {
      const why = prof === 'upstream' ? HIJACK_WHY : canSetTransparent(t) ? HIJACK_TRANSPARENT_WHY : undefined;
      if (why === undefined) continue; // strict's TPROXY drops what reaches a non-transparent squatter
      const c = mutable[prop][t.id][prof];
      mutable[prop][t.id] = {
        ...mutable[prop][t.id],
        [prof]:
          c.verdict === 'bypass'
            ? {
                ...c,
                classes: [...new Set<BypassClass>([...c.classes, 'finding-l'])],
                why: `${c.why}; and ${why}`,
              }
            : bypass(['finding-l'], why, 'appExec'),
      };
    }
  }
}

// Catalog phases (scenarios/attacks/catalog-phases.ts), run for the threat their catalog entry
// names. Only ipv6-without-v6-rules is a bypass: in a dual-stack cluster whose mesh installs no
// v6 rules (meshV6 false), upstream lets v6 out of and into the pod uncaptured (B7, finding-h);
// strict's ipv6-always block ruleset drops it. It is found in app-nonroot's mesh-v6-off world,
// whose upstream cells already expect a bypass (UDP): the class and reason are added there. The
// other catalog phases — reboot-stuck, api-error-at-add, hostile-annotations (app-nonroot) and
// rogue-zds-client (host-root) — are expected to hold in both profiles, so they add nothing here:
// anything they find is an unexpected bypass.
const V6_OFF_WHY =
  'with a v4-only mesh in a dual-stack cluster (meshV6 off, upstream `ambient.ipv6: false`) no v6 rule exists, so v6 leaves and enters the pod uncaptured (B7, finding-h)';
for (const prop of ['outbound-capture', 'inbound-capture', 'authorization'] as const) {
  const c = mutable[prop]['app-nonroot'].upstream;
  if (c.verdict !== 'bypass')
    throw new Error(`expected table: ${prop} × app-nonroot × upstream should already be a bypass before the v6 note`);
  mutable[prop]['app-nonroot'] = {
    ...mutable[prop]['app-nonroot'],
    upstream: {
      ...c,
      classes: [...new Set<BypassClass>([...c.classes, 'B7', 'finding-h'])],
      why: `${c.why}; and ${V6_OFF_WHY}`,
    },
  };
}

// Plaintext to a pod pending enrollment (catalog plaintext-to-pending, phase pending-destination,
// app-nonroot): a mesh peer's node proxy sends plaintext to a pod selected for the mesh that its
// node proxy does not serve (its app holds its 15006), and the app takes it. Upstream's source
// proxy downgrades (istiod's tunnel protocol NONE for a pod not `enabled`): a fail-closed failure
// on top of the UDP bypass the upstream cell already expects. Strict's source proxy refuses
// (no-plaintext-to-pending), so the strict cell still holds; so do its inbound and authorization
// cells (inbound-tproxy: this app cannot make its squatter transparent, so TPROXY gives it nothing).
const PENDING_WHY =
  "a mesh peer's node proxy sends plaintext to a pod selected for the mesh that no proxy serves (annotation pending; istiod gives it tunnel protocol NONE), so the app holding the pod's 15006 takes the peer's traffic without identity or authorization (finding-p, with finding-l)";
{
  const c = mutable['fail-closed']['app-nonroot'].upstream;
  const st = mutable['fail-closed']['app-nonroot'].strict;
  if (c.verdict !== 'bypass' || st.verdict !== 'holds')
    throw new Error(
      'expected table: fail-closed × app-nonroot should be a bypass under upstream and hold under strict before the pending note',
    );
  mutable['fail-closed']['app-nonroot'] = {
    upstream: {
      ...c,
      classes: [...new Set<BypassClass>([...c.classes, 'finding-p', 'finding-l'])],
      why: `${c.why}; and ${PENDING_WHY}`,
    },
    strict: holds(
      `${st.why}; a source proxy refuses plaintext to a pod pending enrollment until it is served (no-plaintext-to-pending)`,
    ),
  };
}

// The nftables backend (deploy/components/backend-nftables). Strict is the same ruleset translated
// rule for rule (impl/node-agent/nftables/ruleset-to-nft.ts), so its cells are iptables'. Upstream's
// nftables backend differs in one place: its host probe rule matches the kubelet's uid (`meta skuid`,
// nftables having no `--socket-exists`), so a non-root host process is no longer SNATed to the probe
// address: its TCP is captured like any inbound TCP, and only the non-TCP bypass stays (finding-k and
// B12 are closed by upstream's nftables backend; host-root, the kubelet's uid, keeps the carve-out).
const NFT_HOST_PROCESS_WHY =
  "upstream's nftables backend SNATs only the kubelet's uid (meta skuid), so a non-root host process's TCP is captured like any inbound TCP; its UDP still reaches the app (upstream lets non-TCP in)";
const NFT_OVERRIDES: Partial<Record<PropertyName, Partial<Record<ThreatId, Partial<Row>>>>> = {
  'inbound-capture': { 'host-process': { upstream: bypass(['B8'], NFT_HOST_PROCESS_WHY) } },
  authorization: { 'host-process': { upstream: bypass(['B8'], `unauthorized delivery: ${NFT_HOST_PROCESS_WHY}`) } },
  'fail-closed': { 'host-process': { upstream: bypass(['B8'], `with the proxy down: ${NFT_HOST_PROCESS_WHY}`) } },
};

export function expectedCell(
  property: PropertyName,
  threat: ThreatId,
  profile: Profile,
  backend: Backend = 'iptables',
): ExpectedCell {
  const cell =
    (backend === 'nftables' ? NFT_OVERRIDES[property]?.[threat]?.[profile] : undefined) ??
    EXPECTED[property]?.[threat]?.[profile];
  if (!cell)
    throw new Error(
      `expected table has no cell for ${property} × ${threat} × ${profile}; add it to scenarios/expected/table.ts`,
    );
  return cell;
}

/** Every cell present and every bypass names a class and a reason (run by the tests). */
export function validateExpectedTable(): string[] {
  const errors: string[] = [];
  for (const p of PROPERTY_NAMES) {
    for (const t of THREATS) {
      for (const prof of ['upstream', 'strict'] as const) {
        const c = EXPECTED[p]?.[t.id]?.[prof];
        const nft = NFT_OVERRIDES[p]?.[t.id]?.[prof];
        if (nft && (nft.why.trim() === '' || (nft.verdict === 'bypass' && nft.classes.length === 0)))
          errors.push(`${p} × ${t.id} × ${prof}/nftables: an override without a reason or a class`);
        if (!c) errors.push(`missing ${p} × ${t.id} × ${prof}`);
        else if (c.why.trim() === '') errors.push(`${p} × ${t.id} × ${prof}: empty why`);
        else if (c.verdict === 'bypass' && c.classes.length === 0)
          errors.push(`${p} × ${t.id} × ${prof}: bypass without a class`);
      }
    }
  }
  return errors;
}
