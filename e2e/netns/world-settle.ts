/**
 * When is the netns world settled? On observed state, never on a quiet period: a round reads the
 * API, each running agent's and proxy's /status and, once those agree, the kernel state of every
 * pod, and lists what is still pending. The world has settled when a round finds nothing pending
 * AND every running agent has finished a whole repair pass begun after the last change this
 * observation saw (the repair loop is how the agent finds drift nobody reports to it: flushed
 * rules, a lost netns, an annotation someone rewrote) AND every pod key the agent is retrying
 * has been retried, and failed again, since that change (a retry may be the one that succeeds)
 * AND, likewise, every pod whose sandbox failed (a refused CNI ADD) has had a sandbox retry by the
 * kubelet that began after that change finish (an attempt already in flight at the change may have
 * run on what changed: a CNI fault cleared while its ADD was under way). A change is a difference
 * in what was read: the kernel facts are compared with the last round that read them, so a round
 * that skipped the kernel (something else pending) is not a change by itself.
 *
 * Pending, per round:
 *   - caches: a running agent's informers do not hold the API's current resourceVersion of every
 *     namespace and of every pod of its node; a running proxy's do not hold every pod's and
 *     every AuthorizationPolicy's (it has not seen a change yet, so nothing it did proves anything);
 *   - work: a running agent has a reconcile in flight, or is not ready;
 *   - ZDS: a running agent and a running proxy on one node are not connected to each other (the
 *     proxy's reconnect backoff reaches 15 s), or, connected, the pods the agent counts as acked
 *     differ from the pods the proxy serves;
 *   - sandboxes: a pod's sandbox operation is under way (the kubelet's retry may have had its ADD
 *     admitted and still be starting the app: the agent and proxy agree on the pod, the lab's
 *     record does not show it started yet);
 *   - addresses: a started pod (not hostNetwork) lacks an IPv4 address — or an IPv6 one in a
 *     dual-stack world — in the lab's record, in the API's podIPs or on its eth0 (or the kernel
 *     still has it tentative: not usable yet);
 *   - rules: a pod whose agent says its rules are applied has no capture rule (a redirect to
 *     15001) in iptables-save — and ip6tables-save in a dual-stack world — of its netns;
 *   - listeners: a pod the proxy serves has no LISTEN socket on 15001, 15006 and 15008 in its
 *     netns (/proc/net/tcp, and tcp6 in a dual-stack world).
 * A pod the agent keeps retrying (its proxy is stopped, or nacks because an app holds its ports)
 * is not pending by itself: `pending` annotation, fail closed, is a legitimate steady state — the
 * retry rule above only makes sure a retry ran after the last change.
 *
 * A round that finds nothing pending but a repair pass owed asks those agents for one at once
 * (POST /repair on the status socket: a pass that begins then is one begun after the change)
 * instead of waiting out their repair interval.
 *
 * The bound. A system that does not converge within `boundMs` is a finding about the system,
 * not a harness error: settle() returns (saying what was still pending, on stderr and in
 * NetnsWorld.lastSettle) and the properties judge the state the world is in — e.g. a pod that
 * should be enrolled but is not served fails convergence. A world that cannot read its own state
 * is a harness error: a tool or an API read that fails throws at once; a running component whose
 * /status cannot be read throws when the bound is reached (it may be between start and ready).
 */
import * as fs from 'node:fs';
import { execIn, ipIn } from './ip.js';
import { isOurs, type NetnsLab } from './world-lab.js';

interface SettleOptions {
  /** Dual-stack world: v6 addresses, v6 rules and v6 listeners are required too. */
  readonly ipv6: boolean;
  /** After this long without convergence, settle returns the world as it is (see above). */
  readonly boundMs: number;
  /** Pause between rounds (a round itself reads the API, every /status and the kernel). */
  readonly pollMs: number;
}

export interface SettleResult {
  readonly converged: boolean;
  readonly rounds: number;
  readonly waitedMs: number;
  /** What was still pending when the bound was reached (empty when converged). */
  readonly pending: readonly string[];
}

/** The proxy's per-pod listeners (impl/api/ports.ts): outbound, inbound plaintext, HBONE. */
const PROXY_PORTS = [15001, 15006, 15008] as const;
const CAPTURE_RULE = /--to-ports 15001\b|--on-port 15001\b/;
/** The outbound capture as `nft list` prints it (both profiles REDIRECT outbound to 15001). */
const NFT_CAPTURE_RULE = /redirect to :15001\b/;

interface AgentStatus {
  ready: boolean;
  proxyConnected: boolean;
  pods: { uid: string; rules: boolean; acked: boolean; annotated?: string }[];
  queue: { inFlight: number; retrying: { key: string; failures: number }[] };
  repairs: { started: number; completed: number };
  caches: { pods: Record<string, string>; namespaces: Record<string, string> } | undefined;
}

interface ProxyStatus {
  zdsConnected: boolean;
  pods: { uid: string }[];
  caches: { pods?: Record<string, string>; policies?: Record<string, string> } | undefined;
}

interface Round {
  /** Everything observed in the API, the components and the sandboxes that a change would show in. */
  readonly digest: string;
  /**
   * The pods' kernel facts (addresses, capture rules, listeners), or undefined when this round did
   * not read them (something else was pending). Kept apart from `digest`: a round that skips the
   * read has not seen the kernel change, and counting "not read" as a change would reset the mark
   * every time a kubelet retry is in flight, so a pod refused for good never let settle converge.
   */
  readonly kernel: string | undefined;
  readonly pending: string[];
  /** Running components whose /status could not be read. */
  readonly unreadable: string[];
  /** Per node with a running agent: repair passes begun/finished and retrying keys' failure counts. */
  readonly agents: Map<string, { repairs: { started: number; completed: number }; retrying: Map<string, number> }>;
  /** Per pod whose sandbox failed: the sandbox attempts the kubelet has begun and finished. */
  readonly sandboxes: Map<string, { readonly finished: number; readonly begun: number }>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function versionsOf(
  objs: readonly { metadata?: { namespace?: string; name?: string; resourceVersion?: string } }[],
  namespaced: boolean,
): Record<string, string> {
  return Object.fromEntries(
    objs.map((o) => [
      namespaced ? `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}` : (o.metadata?.name ?? ''),
      o.metadata?.resourceVersion ?? '',
    ]),
  );
}

/** Keys whose version in `cache` differs from `api` (missing, stale or no longer in the API). */
function staleKeys(api: Record<string, string>, cache: Record<string, string> | undefined): string[] {
  if (cache === undefined) return ['(not synced yet)'];
  const keys = new Set([...Object.keys(api), ...Object.keys(cache)]);
  return [...keys].filter((k) => api[k] !== cache[k]).sort();
}

function listening(procNetTcp: string, port: number): boolean {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  // sl local_address rem_address st ...: st 0A is LISTEN
  return procNetTcp.split('\n').some((l) => {
    const f = l.trim().split(/\s+/);
    return f[1]?.endsWith(`:${hex}`) === true && f[3] === '0A';
  });
}

/** /proc/net/tcp{,6} of the pod's netns: through its app's /proc (no process to start) when the app runs. */
async function procNet(
  pod: { netns: string; app?: Parameters<typeof isOurs>[0] | undefined },
  file: 'tcp' | 'tcp6',
): Promise<string> {
  if (pod.app && isOurs(pod.app)) {
    try {
      return fs.readFileSync(`/proc/${pod.app.pid}/net/${file}`, 'utf8');
    } catch {
      // the app exited between the check and the read: ask the netns itself
    }
  }
  return execIn(pod.netns, ['cat', `/proc/net/${file}`]);
}

async function observe(lab: NetnsLab, ipv6: boolean): Promise<Round> {
  const pending: string[] = [];
  const unreadable: string[] = [];
  const agents: Round['agents'] = new Map();
  const sandboxes: Round['sandboxes'] = new Map();
  // A kubelet retry that failed for the harness's own reasons: the world cannot be trusted.
  if (lab.kubeletErrors.length > 0) throw new Error(lab.kubeletErrors.join('; '));
  // A failing API read is a harness error: it propagates.
  const [apiPods, apiNamespaces, apiPolicies] = await Promise.all([
    lab.api.list('Pod'),
    lab.api.list('Namespace'),
    lab.api.list('AuthorizationPolicy'),
  ]);
  const podVersions = versionsOf(apiPods, true);
  const nsVersions = versionsOf(apiNamespaces, false);
  const policyVersions = versionsOf(apiPolicies, true);
  const digest: unknown[] = [podVersions, nsVersions, policyVersions];
  /** Pod uids whose agent says rules are applied; pod uids a proxy serves. */
  const rulesClaimed = new Set<string>();
  const served = new Set<string>();
  for (const n of lab.state.nodes) {
    const a = await lab.componentStatus('agent', n.name);
    const p = await lab.componentStatus('proxy', n.name);
    const agent = a.status as AgentStatus | undefined;
    const proxy = p.status as ProxyStatus | undefined;
    if (a.running && !agent) unreadable.push(`agent on ${n.name}: /status: ${a.detail}`);
    if (p.running && !proxy) unreadable.push(`proxy on ${n.name}: /status: ${p.detail}`);
    digest.push([
      n.name,
      a.running,
      p.running,
      agent && (a.status?.['pid'] as number | undefined),
      proxy && (p.status?.['pid'] as number | undefined),
      agent && [
        agent.ready,
        agent.proxyConnected,
        agent.pods,
        agent.queue.retrying.map((r) => r.key).sort(),
        agent.caches,
      ],
      proxy && [proxy.zdsConnected, proxy.pods.map((x) => x.uid).sort(), proxy.caches],
    ]);
    if (agent) {
      agents.set(n.name, {
        repairs: agent.repairs,
        retrying: new Map(agent.queue.retrying.map((r) => [r.key, r.failures])),
      });
      if (!a.ready) pending.push(`agent on ${n.name} is not ready: ${a.detail}`);
      if (agent.queue.inFlight > 0)
        pending.push(`agent on ${n.name} has ${agent.queue.inFlight} reconcile(s) in flight`);
      const nodePods = Object.fromEntries(
        apiPods
          .filter((x) => x.spec?.nodeName === n.name)
          .map((x) => [`${x.metadata?.namespace}/${x.metadata?.name}`, x.metadata?.resourceVersion ?? '']),
      );
      const stale = [
        ...staleKeys(nodePods, agent.caches?.pods),
        ...staleKeys(nsVersions, agent.caches?.namespaces).map((k) => `namespace ${k}`),
      ];
      if (stale.length > 0)
        pending.push(`agent on ${n.name} has not seen the API's current ${[...new Set(stale)].join(', ')}`);
      for (const mp of agent.pods) if (mp.rules) rulesClaimed.add(mp.uid);
    }
    if (proxy) {
      for (const sp of proxy.pods) served.add(sp.uid);
      const stale = [
        ...staleKeys(podVersions, proxy.caches?.pods),
        ...staleKeys(policyVersions, proxy.caches?.policies).map((k) => `policy ${k}`),
      ];
      if (stale.length > 0)
        pending.push(`proxy on ${n.name} has not seen the API's current ${[...new Set(stale)].join(', ')}`);
    }
    if (agent && proxy) {
      if (!agent.proxyConnected || !proxy.zdsConnected) {
        pending.push(
          `proxy and agent on ${n.name} are not connected over ZDS (agent says ${agent.proxyConnected}, proxy says ${proxy.zdsConnected})`,
        );
      } else {
        const acked = agent.pods
          .filter((x) => x.acked)
          .map((x) => x.uid)
          .sort();
        const serving = proxy.pods.map((x) => x.uid).sort();
        if (acked.join() !== serving.join()) {
          const detail = agent.pods
            .map((x) => `${x.uid} rules ${x.rules} acked ${x.acked} ${x.annotated ?? '-'}`)
            .join(', ');
          const retrying = agent.queue.retrying.map((r) => `${r.key} x${r.failures}`).join(', ');
          pending.push(
            `on ${n.name} the agent counts [${acked.join(', ')}] acked, the proxy serves [${serving.join(', ')}] (agent: ${detail || 'no mesh pods'}; retrying: ${retrying || 'none'})`,
          );
        }
      }
    }
  }
  // Addresses in the lab's record and the API.
  for (const p of Object.values(lab.state.pods)) {
    const key = `${p.namespace}/${p.name}`;
    // A sandbox operation under way (a kubelet retry starting the app after its ADD succeeded, say)
    // leaves the pod's record between states: neither started nor failed, it would otherwise be
    // seen as nothing at all while the agent and proxy already agree on it.
    if (lab.sandboxInFlight(key))
      pending.push(`pod ${key}: a sandbox operation (creation, retry or teardown) is under way`);
    // A sandbox that failed (CNI ADD refused, the app did not start) is not pending by itself:
    // a pod the plugin fails closed stays so. Its reason goes into the digest and the report.
    if (!p.started && p.error !== undefined) {
      digest.push([key, 'sandbox failed', p.error]);
      sandboxes.set(key, { finished: p.sandboxAttempts ?? 0, begun: p.sandboxStarts ?? p.sandboxAttempts ?? 0 });
    }
    if (!p.started || p.hostNetwork) continue;
    const want = [
      ...(p.ips.some((ip) => !ip.includes(':')) ? [] : ['IPv4']),
      ...(ipv6 && !p.ips.some((ip) => ip.includes(':')) ? ['IPv6'] : []),
    ];
    if (want.length > 0)
      pending.push(`pod ${key} has no ${want.join(' or ')} address (CNI result: [${p.ips.join(', ')}])`);
    const api = apiPods.find((x) => x.metadata?.namespace === p.namespace && x.metadata?.name === p.name);
    const apiIps = (api?.status?.podIPs ?? []).map((x) => x.ip ?? '');
    if (api?.status?.phase !== 'Running' || apiIps.join() !== p.ips.join()) {
      pending.push(
        `pod ${key}: the API says ${api?.status?.phase ?? '(no pod)'} [${apiIps.join(', ')}], the sandbox runs with [${p.ips.join(', ')}]`,
      );
    }
  }
  let kernel: unknown[] | undefined;
  // The kernel only once the API and the components agree: until then a round is pending anyway.
  if (pending.length === 0 && unreadable.length === 0) {
    kernel = [];
    for (const p of Object.values(lab.state.pods)) {
      if (!p.started || p.hostNetwork || !p.netns) continue;
      const key = `${p.namespace}/${p.name}`;
      // A failing read (tool missing, netns gone under us) is a harness error: it propagates.
      const links = JSON.parse(await ipIn(p.netns, ['-j', 'addr', 'show', 'dev', 'eth0'])) as {
        addr_info?: { local?: string; tentative?: boolean; dadfailed?: boolean }[];
      }[];
      const addrs = links.flatMap((l) => l.addr_info ?? []);
      for (const ip of p.ips) {
        const a = addrs.find((x) => x.local === ip);
        if (!a) pending.push(`pod ${key}: ${ip} is not on its eth0`);
        else if (a.tentative === true || a.dadfailed === true)
          pending.push(`pod ${key}: ${ip} is ${a.dadfailed ? 'dadfailed' : 'tentative'} on its eth0`);
      }
      const facts: Record<string, boolean> = {};
      if (rulesClaimed.has(p.uid) && lab.state.rulesBackend === 'nftables') {
        // The nftables backend: one ruleset for both families; the v4 and v6 captures are its rules.
        const ruleset = await execIn(p.netns, ['nft', '-s', 'list', 'ruleset']);
        facts['nftrules'] = NFT_CAPTURE_RULE.test(ruleset);
        if (!facts['nftrules'])
          pending.push(`pod ${key}: its agent says its rules are applied, the nftables ruleset shows no capture`);
      } else if (rulesClaimed.has(p.uid)) {
        facts['v4rules'] = CAPTURE_RULE.test(await execIn(p.netns, ['iptables-save']));
        if (!facts['v4rules'])
          pending.push(`pod ${key}: its agent says its rules are applied, iptables-save shows no capture`);
        if (ipv6) {
          facts['v6rules'] = CAPTURE_RULE.test(await execIn(p.netns, ['ip6tables-save']));
          if (!facts['v6rules'])
            pending.push(`pod ${key}: its agent says its rules are applied, ip6tables-save shows no capture`);
        }
      }
      if (served.has(p.uid)) {
        const tcp = await procNet({ netns: p.netns, app: p.app }, 'tcp');
        const tcp6 = ipv6 ? await procNet({ netns: p.netns, app: p.app }, 'tcp6') : '';
        for (const port of PROXY_PORTS) {
          facts[`l${port}`] = listening(tcp, port) && (!ipv6 || listening(tcp6, port));
          if (!facts[`l${port}`])
            pending.push(
              `pod ${key}: served by its proxy, but no LISTEN socket on ${port}${ipv6 ? ' (v4 and v6)' : ''} in its netns`,
            );
        }
      }
      kernel.push([key, addrs.map((a) => `${a.local}${a.tentative ? '?' : ''}`).sort(), facts]);
    }
  }
  return {
    digest: JSON.stringify(digest),
    kernel: kernel && JSON.stringify(kernel),
    pending,
    unreadable,
    agents,
    sandboxes,
  };
}

/** The last few warnings each component logged: what a report of non-convergence needs to be read. */
function recentWarnings(lab: NetnsLab): string[] {
  const out: string[] = [];
  for (const n of lab.state.nodes) {
    for (const c of ['agent', 'proxy'] as const) {
      let text: string;
      try {
        text = fs.readFileSync(`${lab.nodeDir(n.name)}/${c}.log`, 'utf8').slice(-64 * 1024);
      } catch {
        continue;
      }
      const warn = text
        .split('\n')
        .filter((l) => /"level":"(warn|error|fatal)"/.test(l))
        .slice(-3)
        .map((l) => {
          try {
            const o = JSON.parse(l) as { msg?: string; error?: string; pod?: string };
            return `${o.msg ?? ''}${o.pod ? ` (${o.pod})` : ''}${o.error ? `: ${o.error}` : ''}`;
          } catch {
            return l.slice(0, 300);
          }
        });
      if (warn.length > 0) out.push(`${c} on ${n.name} last warned: ${warn.join(' | ')}`);
    }
  }
  return out;
}

/** Poll rounds until settled (see the file comment) or the bound; throws only when the world cannot read its state. */
export async function settleNetnsWorld(lab: NetnsLab, opts: SettleOptions): Promise<SettleResult> {
  const start = Date.now();
  let rounds = 0;
  /** The last change seen, and each agent's repair passes begun and retry counts at that moment. */
  let mark: { digest: string; agents: Round['agents']; sandboxes: Round['sandboxes'] } | undefined;
  /** The kernel facts as last read: a round that did not read them changes nothing. */
  let kernelSeen: string | undefined;
  for (;;) {
    const o = await observe(lab, opts.ipv6);
    rounds++;
    const kernelChanged = o.kernel !== undefined && o.kernel !== kernelSeen;
    if (o.kernel !== undefined) kernelSeen = o.kernel;
    if (mark === undefined || mark.digest !== o.digest || kernelChanged)
      mark = { digest: o.digest, agents: o.agents, sandboxes: o.sandboxes };
    const waiting = [...o.pending, ...o.unreadable];
    /** Nodes whose agent owes a repair pass begun after the change. */
    const owing: string[] = [];
    for (const [node, a] of o.agents) {
      const then = mark.agents.get(node);
      // A pass that began after the change, finished.
      if (a.repairs.completed <= (then?.repairs.started ?? a.repairs.started)) {
        owing.push(node);
        waiting.push(`agent on ${node}: no repair pass begun since the last change has finished`);
      }
      for (const [key, failures] of a.retrying) {
        if (failures <= (then?.retrying.get(key) ?? failures))
          waiting.push(`agent on ${node}: ${key} has not been retried since the last change`);
      }
    }
    for (const [key, attempts] of o.sandboxes) {
      // An attempt begun after the change has finished (one in flight at the change may have run on what changed).
      if (attempts.finished <= (mark.sandboxes.get(key)?.begun ?? attempts.finished))
        waiting.push(`pod ${key}: the kubelet has not retried its failed sandbox since the last change`);
    }
    if (waiting.length === 0) return { converged: true, rounds, waitedMs: Date.now() - start, pending: [] };
    if (Date.now() - start >= opts.boundMs) {
      if (o.unreadable.length > 0) {
        throw new Error(
          `settle: the netns world cannot read its own state after ${opts.boundMs} ms: ${o.unreadable.join('; ')} — see the component logs under ${lab.state.runDir}`,
        );
      }
      const failedSandboxes = Object.values(lab.state.pods)
        .filter((p) => !p.started && p.error !== undefined)
        .map((p) => `pod ${p.namespace}/${p.name} has no sandbox: ${p.error}`);
      return {
        converged: false,
        rounds,
        waitedMs: Date.now() - start,
        pending: [...waiting, ...failedSandboxes, ...recentWarnings(lab)],
      };
    }
    // Nothing else pending: instead of waiting out the repair interval, ask each agent still
    // owing a pass begun after the change for one now (POST /repair), and look again at once.
    if (o.pending.length === 0 && o.unreadable.length === 0 && owing.length > 0) {
      const asked = await Promise.allSettled(owing.map((node) => lab.agentRepairNow(node)));
      // A refused request (the agent stopping, say) only means no shortcut: the next round reads
      // what happened, and the bound reports a pass that never came.
      if (asked.every((r) => r.status === 'fulfilled')) continue;
    }
    await sleep(opts.pollMs);
  }
}
