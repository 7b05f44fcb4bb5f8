/**
 * Rule profiles. `upstream` reproduces istio-cni's in-pod and host rules (istio/istio cni/pkg/iptables/) so the
 * harness can measure what upstream guarantees; `strict` is our hardened set. Each strict choice
 * is listed here with its reason and its cost, so the README, the golden files' story and the
 * behaviour tests all point at one list (rule ids in the IR name the choice they implement).
 */
import type { Port } from '../api/ports.js';

/** What `strict` needs to know that `upstream` does not ask for. */
export interface StrictInputs {
  /**
   * Uid that owns the node proxy's sockets in the pod netns. Only packets carrying the proxy
   * mark **and** owned by this uid skip capture (upstream: the mark alone).
   */
  readonly proxyUid: number;
  /** TCP ports the pod's kubelet probes target (httpGet/tcpSocket/grpc); the probe carve-out is limited to them. */
  readonly probePorts: readonly Port[];
}

interface StrictChoice {
  readonly id: string;
  readonly summary: string;
  readonly rationale: string;
  readonly cost: string;
}

export const STRICT_CHOICES: readonly StrictChoice[] = [
  {
    id: 'probe-ports',
    summary:
      "The probe carve-out (source = probe SNAT address) accepts only the pod's declared probe ports; with none declared there is no carve-out.",
    rationale:
      'Upstream accepts all TCP from 169.254.7.127 on any port, so any host socket or hostNetwork pod (all are SNATed) reaches every port of the app without policy (finding-k, docs/bypass-classes.md).',
    cost: 'The builder must be given the probe ports; a probe port added to the pod spec needs a rule refresh; non-probe host traffic is now policed like any inbound traffic.',
  },
  {
    id: 'proxy-uid',
    summary:
      'Capture is skipped only for packets carrying the proxy mark from sockets owned by the proxy uid (nat OUTPUT `-m mark --mark 0x539/0xfff -m owner --uid-owner P -j ACCEPT`), not for the mark alone.',
    rationale:
      'An app with CAP_NET_RAW (default in containerd; enough for SO_MARK since Linux 5.17) or CAP_NET_ADMIN can set mark 0x539 and skip the outbound and DNS redirects (finding-j, B4).',
    cost: "The proxy uid is configuration; an app running as the proxy uid is still exempt (B1). The agent refuses the proxy uid 0 and any pod whose spec declares the proxy uid (proxy-uid-pods.ts); an image's USER is invisible to it, so admission must keep apps off the proxy uid.",
  },
  {
    id: 'drop-spoofed-mark',
    summary:
      'filter OUTPUT drops packets that carry the proxy mark from a socket not owned by the proxy uid; TCP RSTs pass first.',
    rationale:
      'Defence in depth behind proxy-uid: a spoofed mark also steers routing and conntrack zones and exempts non-TCP from the egress policy; dropping it closes every mark-based path at once.',
    cost: "Apps that legitimately set mark 0x539/0xfff bits break. IPv4 sends a stray segment's RST from the namespace's fileless TCP control socket with the answering socket's mark, which `--socket-exists ! --uid-owner P` matches (checked on Linux 6.18), so RSTs are let through first (rule filter/out/rst): a RST is never captured, and dropping a proxy listener's RST stalled connections it should reset (live enrollment, docs/bypass-classes.md). The proxy's TIME_WAIT ACKs (and segments of its orphaned closing sockets) also carry its mark without its socket, but xt_owner sees no socket for them, so `--socket-exists` does not match and they pass (checked on Linux 6.18: tests/netns/rules/strict-control-segments.spec.ts).",
  },
  {
    id: 'no-probe-destination-exemption',
    summary: "Upstream's nat OUTPUT `-d <probe address> -p tcp -j ACCEPT` is left out.",
    rationale:
      'nat OUTPUT sees only new connections, so the rule never serves probe replies; it only lets the app open uncaptured connections to that address.',
    cost: 'None known: app connections to the probe address go to the proxy like any other.',
  },
  {
    id: 'non-tcp-fail-closed',
    summary:
      'filter drops non-TCP traffic the proxy cannot carry: outbound UDP and other protocols not to loopback (DNS is redirected first when captured, and allowed to port 53 when not), and inbound non-TCP that is not loopback or a reply to an allowed flow. ICMP/ICMPv6 stay allowed.',
    rationale:
      'Upstream lets all UDP, SCTP etc. bypass the proxy in both directions (finding-i, B8): no identity, no authorization. The proxy cannot carry them, so failing closed is the only way to keep the capture properties true.',
    cost: 'Apps that use UDP (QUIC/HTTP3, NTP, statsd, WebRTC, non-53 DNS) break in strict pods; ICMP remains a low-bandwidth side channel (echo payloads); DNS over UDP/TCP 53 still leaves uncaptured when DNS capture is off.',
  },
  {
    id: 'ipv6-always',
    summary:
      'The v6 ruleset is always installed: the capture rules when IPv6 is enabled and loopback has IPv6, otherwise a v6 block (drop everything but loopback).',
    rationale:
      'Upstream installs no v6 rules when IPv6 is disabled (or tolerates missing ip6tables), so a pod that still has v6 connectivity bypasses capture over v6 (finding-h, B7).',
    cost: 'Pods in clusters with IPv6 disabled in the mesh get no IPv6 at all, even where the network offers it.',
  },
  {
    id: 'inbound-tproxy',
    summary:
      'Inbound plaintext TCP is captured in mangle PREROUTING with `-j TPROXY --on-port 15006 --tproxy-mark 0x111/0xfff` (new connections, bare SYNs only, not arriving on lo; the probe ports and virtual interfaces return first) instead of nat `REDIRECT --to-ports 15006`; a NEW entry that starts with any other segment (a connection picked up mid-stream: open before enrollment, or its entry lost) is REDIRECTed to 15006 in nat (`reset-midstream`), where no socket has its tuple, so it is reset.',
    rationale:
      "REDIRECT hands inbound to whatever socket holds 15006; while the node proxy restarts, an app without any capability can bind it, the proxy gets EADDRINUSE, and inbound reaches the app with no policy (finding-l). TPROXY assigns a packet only to a transparent socket (IP_TRANSPARENT, which needs CAP_NET_RAW or CAP_NET_ADMIN) and drops it otherwise, so such a squatter gets nothing: inbound fails closed. The proxy's listeners are transparent and read the target from the accepted socket's local address. Not closed: an app with NET_RAW (containerd's default set) or NET_ADMIN can make its squatter transparent; only admission (drop NET_RAW) or a bind guard on the proxy ports (eBPF/LSM, upstream PR #49078) closes that.",
    cost: "The pod netns needs the TPROXY target (xt_TPROXY, nf_tproxy_ipv4/ipv6 modules) and the proxy must keep IP_TRANSPARENT on its listeners (so it needs NET_RAW or NET_ADMIN in the pod netns, which it has for spoofing anyway). The probe carve-out and the virtual-interface exemption move to mangle. A captured connection whose conntrack entry is lost (`conntrack -F`, an idle entry expiring) is reset, where upstream's REDIRECT finds the proxy's socket again (`-m socket --transparent` ahead of reset-midstream would spare it; not done).",
  },
  {
    id: 'exclusive-tables',
    summary:
      "The agent owns the pod's whole ruleset: it applies the plan by one full iptables-restore per family (no --noflush) that replaces the plan's tables whole and empties every other iptables table that holds anything, and deletes every nftables table that is not its own (with the nftables backend the document starts with `flush ruleset`); its repair pass treats anything else (a rule in a built-in chain besides the plan's hooks, a user chain the plan does not declare, a built-in policy other than ACCEPT, any rule in a table the plan does not use, any foreign nftables table) as drift.",
    rationale:
      "An app with NET_ADMIN can insert `-I OUTPUT 1 -j ACCEPT` ahead of the hook into ISTIO_OUTPUT, or leave TCP untracked (`-t raw -j CT --notrack`, or an nftables table of its own with `notrack` at raw priority) so that no redirect and no `--ctstate NEW` TPROXY ever sees it; upstream's reconcile compares only its own chains and hooks, so such a rule stays for good (B3, B14). The attack catalog found the nftables form outliving strict's repair while strict looked only at the plan's iptables tables; the raw form outlives it the same way when DNS capture is off and the plan has no raw table (tests/sim/node-agent/agent/foreign-rules.spec.ts).",
    cost: "Nothing else may keep rules in the pod's network namespace: another CNI's or the app's own iptables rules and nftables tables there are removed at the next apply or repair pass. Strict needs `nft` (Debian package nftables) beside iptables on the node, in either backend, to read and clear the nftables ruleset.",
  },
  {
    id: 'no-plaintext-to-pending',
    summary:
      'The node proxy (impl/ztunnel/outbound.ts) refuses an outbound connection to a pod pending enrollment (ambient.istio.io/redirection: pending: the agent selected it by its pod or namespace label, no node proxy has acknowledged it) instead of sending it plaintext; it fails closed until the destination is served (HBONE).',
    rationale:
      "Upstream sends such a pod plaintext (istiod gives a pod that is not `enabled` tunnel protocol NONE; ztunnel's build_request sends TCP to its address), so whatever holds its 15006 — an app squatting it while its proxy cannot bind (finding-l) — gets mesh traffic without identity, and DENY policies naming the peer are skipped (finding-p).",
    cost: 'Mesh pods cannot reach a pod while it is pending (its proxy down or unable to bind): connections to it are reset until it is served, where upstream would deliver them plaintext once its proxy is back. The window before the agent writes `pending` (a pod just labelled, no rules yet) is unchanged: the pod is outside the mesh until then.',
  },
  {
    id: 'host-probe-kubelet-uid',
    summary:
      'The host probe SNAT matches sockets owned by the kubelet uid (`-m owner --uid-owner K`) instead of any socket (`--socket-exists`).',
    rationale:
      'With `--socket-exists` every host process and every hostNetwork pod is SNATed to the probe address and so inherits the probe carve-out (finding-k).',
    cost: 'kubelet usually runs as uid 0, so this narrows to root-owned host sockets; non-root hostNetwork pods are now policed. The in-pod probe-ports limit is what really bounds the carve-out.',
  },
];
