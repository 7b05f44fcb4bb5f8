/**
 * Hand-written labs with `nftables:` documents, run in the simulator (datapath.spec.ts) and
 * against the real kernel (tests/netns/fidelity/nftables.spec.ts), so the expectations written
 * here are checked against Linux too.
 */

/**
 * One namespace, loopback connections, iptables and nft base chains at the same hooks:
 * - 8081: iptables mangle OUTPUT marks 0x1; an nft chain at -160 (before mangle) that drops
 *   mark 0x1 does not see it: established.
 * - 8086: marked the same; an nft chain at -140 (after mangle) drops mark 0x1: times out.
 * - 8088: marked the same; an nft chain at -150, the same priority as iptables' mangle, drops
 *   mark 0x1 but runs first: on a tie the hook registered last runs first, and the nft table is
 *   made after the iptables tables — established.
 * - 8089: two nft chains at 10; the one declared second runs first, so the first one's mark comes
 *   too late for it — established.
 * - 8084: an nft chain at -160 accepts, iptables filter OUTPUT drops: accept ends only its own
 *   base chain — times out.
 * - 8082: iptables nat REDIRECT to 15001 and an nft nat chain at -150 REDIRECT to 15002: the nft
 *   chain runs first among the NAT chains and binds — 15002.
 * - 8083: the same with the nft nat chain at -50: iptables' nat (-100) binds first — 15001.
 * - 8087: the nft nat chain at -150 accepts without NAT; iptables' nat still runs — 15001.
 * - 8091: the nft nat chain at -150 redirects to 15002, yet a filter chain at -120 that drops
 *   dport 15002 does not see it: NAT happens in the NAT core at -100, whatever the nat chain's
 *   priority — established on 15002.
 * - 9999 (closed): the kernel's RST comes from a socket without a file; `meta skuid != 4242 drop`
 *   does not match it (refused), where xt_owner's `! --uid-owner 4242` would.
 */
export const MIXED_LAB = `version: 1
kernel: "6.1"
namespaces:
  - name: a
    iptables: |
      *mangle
      :PREROUTING ACCEPT [0:0]
      :INPUT ACCEPT [0:0]
      :FORWARD ACCEPT [0:0]
      :OUTPUT ACCEPT [0:0]
      :POSTROUTING ACCEPT [0:0]
      -A OUTPUT -p tcp -m tcp --dport 8081 -j MARK --set-xmark 0x1/0xffffffff
      -A OUTPUT -p tcp -m tcp --dport 8086 -j MARK --set-xmark 0x1/0xffffffff
      -A OUTPUT -p tcp -m tcp --dport 8088 -j MARK --set-xmark 0x1/0xffffffff
      COMMIT
      *nat
      :PREROUTING ACCEPT [0:0]
      :INPUT ACCEPT [0:0]
      :OUTPUT ACCEPT [0:0]
      :POSTROUTING ACCEPT [0:0]
      -A OUTPUT -p tcp -m tcp --dport 8082 -j REDIRECT --to-ports 15001
      -A OUTPUT -p tcp -m tcp --dport 8083 -j REDIRECT --to-ports 15001
      -A OUTPUT -p tcp -m tcp --dport 8087 -j REDIRECT --to-ports 15001
      COMMIT
      *filter
      :INPUT ACCEPT [0:0]
      :FORWARD ACCEPT [0:0]
      :OUTPUT ACCEPT [0:0]
      -A OUTPUT -p tcp -m tcp --dport 8084 -j DROP
      COMMIT
    nftables: |
      table inet t {
        chain before-mangle {
          type filter hook output priority -160; policy accept;
          tcp dport 8081 meta mark 0x1 drop
          tcp dport 8084 accept
        }
        chain tie-mangle {
          type filter hook output priority mangle; policy accept;
          tcp dport 8088 meta mark 0x1 drop
        }
        chain tie-first-declared {
          type filter hook output priority 10; policy accept;
          tcp dport 8089 meta mark set 0x2
        }
        chain tie-second-declared {
          type filter hook output priority 10; policy accept;
          tcp dport 8089 meta mark 0x2 drop
        }
        chain after-mangle {
          type filter hook output priority -140; policy accept;
          tcp dport 8086 meta mark 0x1 drop
        }
        chain nat-early {
          type nat hook output priority -150; policy accept;
          tcp dport 8082 redirect to :15002
          tcp dport 8087 accept
          tcp dport 8091 redirect to :15002
        }
        chain filter-between {
          type filter hook output priority -120; policy accept;
          tcp dport 15002 drop
        }
        chain nat-late {
          type nat hook output priority -50; policy accept;
          tcp dport 8083 redirect to :15002
        }
        chain rst {
          type filter hook output priority 0; policy accept;
          tcp sport 9999 meta skuid != 4242 drop
        }
      }
sockets:
  - { name: s8081, netns: a, address: 127.0.0.1, port: 8081, uid: 0 }
  - { name: s8084, netns: a, address: 127.0.0.1, port: 8084, uid: 0 }
  - { name: s8086, netns: a, address: 127.0.0.1, port: 8086, uid: 0 }
  - { name: s8088, netns: a, address: 127.0.0.1, port: 8088, uid: 0 }
  - { name: s8089, netns: a, address: 127.0.0.1, port: 8089, uid: 0 }
  - { name: p15001, netns: a, port: 15001, uid: 0 }
  - { name: p15002, netns: a, port: 15002, uid: 0 }
attempts:
  - { name: mark-before-mangle, netns: a, address: 127.0.0.1, port: 8081, uid: 1000 }
  - { name: mark-after-mangle, netns: a, address: 127.0.0.1, port: 8086, uid: 1000 }
  - { name: mark-tie-mangle, netns: a, address: 127.0.0.1, port: 8088, uid: 1000 }
  - { name: nft-tie, netns: a, address: 127.0.0.1, port: 8089, uid: 1000 }
  - { name: accept-then-filter-drop, netns: a, address: 127.0.0.1, port: 8084, uid: 1000 }
  - { name: nft-nat-first, netns: a, address: 127.0.0.1, port: 8082, uid: 1000 }
  - { name: iptables-nat-first, netns: a, address: 127.0.0.1, port: 8083, uid: 1000 }
  - { name: nft-nat-accepts, netns: a, address: 127.0.0.1, port: 8087, uid: 1000 }
  - { name: nat-in-the-core, netns: a, address: 127.0.0.1, port: 8091, uid: 1000 }
  - { name: rst-from-kernel-socket, netns: a, address: 127.0.0.1, port: 9999, uid: 1000 }
`;

/**
 * Two namespaces over a veth, nftables alone on the server: destination NAT in prerouting
 * (redirect, dnat ip to), an input chain with policy drop that accepts established traffic and
 * two ports, and `meta skuid != 0 accept` at input, which an incoming SYN (no socket) never
 * matches: dropped by the policy. `meta skuid 0 drop` at input lets the SYN through (no socket)
 * but drops the handshake's last ACK, which TCP early demux gives the listener's socket. IPv6 through the same inet table: the redirect applies, `dnat
 * ip to` does not (its implicit `meta nfproto ipv4`), and ICMPv6 is accepted so neighbour
 * discovery works under the drop policy.
 */
export const ALONE_LAB = `version: 1
kernel: "6.1"
namespaces:
  - name: client
  - name: server
    nftables: |
      table inet srv {
        chain pre {
          type nat hook prerouting priority dstnat; policy accept;
          tcp dport 80 redirect to :8080
          tcp dport 90 redirect to :8090
          ip daddr 10.0.0.2 tcp dport 81 dnat ip to 10.0.0.2:8081
        }
        chain in {
          type filter hook input priority filter; policy drop;
          tcp dport 8084 meta skuid 0 drop
          ct state established,related accept
          meta l4proto ipv6-icmp accept
          tcp dport 8082 meta skuid != 0 accept
          tcp dport { 8080, 8081, 8084, 8090 } accept
        }
      }
veths:
  - a: { netns: client, name: eth0, addresses: [10.0.0.1/24, "fd00::1/64"] }
    b: { netns: server, name: eth0, addresses: [10.0.0.2/24, "fd00::2/64"] }
sockets:
  - { name: s8080, netns: server, port: 8080, uid: 0 }
  - { name: s8090v6, netns: server, family: 6, port: 8090, uid: 0 }
  - { name: s81v6, netns: server, family: 6, port: 81, uid: 0 }
  - { name: s8081, netns: server, port: 8081, uid: 0 }
  - { name: s8082, netns: server, port: 8082, uid: 0 }
  - { name: s8083, netns: server, port: 8083, uid: 0 }
  - { name: s8084, netns: server, port: 8084, uid: 0 }
attempts:
  - { name: redirected, netns: client, address: 10.0.0.2, port: 80, uid: 1000 }
  - { name: dnat, netns: client, address: 10.0.0.2, port: 81, uid: 1000 }
  - { name: skuid-on-input, netns: client, address: 10.0.0.2, port: 8082, uid: 1000 }
  - { name: policy-drop, netns: client, address: 10.0.0.2, port: 8083, uid: 1000 }
  - { name: skuid-early-demux, netns: client, address: 10.0.0.2, port: 8084, uid: 1000 }
  - { name: direct, netns: client, address: 10.0.0.2, port: 8080, uid: 1000 }
  - { name: redirected-v6, netns: client, address: "fd00::2", port: 90, uid: 1000 }
  - { name: dnat-ip-not-for-v6, netns: client, address: "fd00::2", port: 81, uid: 1000 }
`;

/**
 * nft's tproxy statement: with a transparent listener it assigns the socket and the rule goes on
 * (mark, accept); with none the rule breaks and the chain goes on, so the packet is delivered as
 * addressed — where iptables' TPROXY drops it. The socket tproxy assigned is the packet's socket
 * for later chains: `meta skuid 0 drop` at priority 0 drops what was given to root's listener.
 */
export const TPROXY_LAB = `version: 1
kernel: "6.1"
namespaces:
  - name: client
  - name: server
    routes:
      - { dst: 0.0.0.0/0, type: local, dev: lo, table: 100 }
    rules:
      - { family: 4, priority: 100, fwmark: 0x1/0x1, table: 100 }
    nftables: |
      table ip tp {
        chain pre {
          type filter hook prerouting priority mangle; policy accept;
          tcp dport 9000 tproxy to :15001 meta mark set 0x1 accept
          tcp dport 9001 tproxy to :15009 meta mark set 0x1 accept
          tcp dport 9002 tproxy to :15001 meta mark set 0x1 accept
        }
        chain pre-late {
          type filter hook prerouting priority filter; policy accept;
          tcp dport 9002 meta skuid 0 drop
        }
      }
veths:
  - a: { netns: client, name: eth0, addresses: [10.0.0.1/24] }
    b: { netns: server, name: eth0, addresses: [10.0.0.2/24] }
sockets:
  - { name: tp, netns: server, port: 15001, uid: 0, caps: [NET_ADMIN], transparent: true }
  - { name: s9000, netns: server, port: 9000, uid: 0 }
  - { name: s9001, netns: server, port: 9001, uid: 0 }
attempts:
  - { name: tproxied, netns: client, address: 10.0.0.2, port: 9000, uid: 1000 }
  - { name: no-tproxy-socket, netns: client, address: 10.0.0.2, port: 9001, uid: 1000 }
  - { name: tproxied-then-skuid, netns: client, address: 10.0.0.2, port: 9002, uid: 1000 }
`;

/**
 * A `route`-type output chain that changes the mark re-routes the packet (here into an
 * unreachable table: the SYN is dropped, connect times out); a filter-type chain that does the
 * same does not re-route (the connection is made as first routed).
 */
export const ROUTE_LAB = `version: 1
kernel: "6.1"
namespaces:
  - name: client
    routes:
      - { dst: 0.0.0.0/0, type: unreachable, table: 100 }
    rules:
      - { family: 4, priority: 100, fwmark: 0x1/0x1, table: 100 }
    nftables: |
      table inet r {
        chain route-out {
          type route hook output priority mangle; policy accept;
          tcp dport 7000 meta mark set 0x1
        }
        chain filter-out {
          type filter hook output priority mangle + 1; policy accept;
          tcp dport 7001 meta mark set 0x1
        }
      }
  - name: server
veths:
  - a: { netns: client, name: eth0, addresses: [10.0.0.1/24] }
    b: { netns: server, name: eth0, addresses: [10.0.0.2/24] }
sockets:
  - { name: s7000, netns: server, port: 7000, uid: 0 }
  - { name: s7001, netns: server, port: 7001, uid: 0 }
attempts:
  - { name: route-chain-reroutes, netns: client, address: 10.0.0.2, port: 7000, uid: 1000 }
  - { name: filter-chain-does-not, netns: client, address: 10.0.0.2, port: 7001, uid: 1000 }
`;

/**
 * A router forwarding between two namespaces, nftables only: `meta skuid != 12345 drop` at
 * forward never matches a forwarded packet (no socket), a plain drop does; masquerade at
 * postrouting hides the client behind the router's address (the server has no route back).
 */
export const FORWARD_LAB = `version: 1
kernel: "6.1"
namespaces:
  - name: client
    routes:
      - { dst: default, via: 10.1.0.1 }
  - name: router
    forwarding: { ipv4: true }
    nftables: |
      table ip fw {
        chain fwd-filter {
          type filter hook forward priority filter; policy accept;
          tcp dport 9101 drop
          tcp dport 9100 meta skuid != 12345 drop
        }
        chain postrt {
          type nat hook postrouting priority srcnat; policy accept;
          oifname "eth1" masquerade
        }
      }
  - name: server
veths:
  - a: { netns: client, name: eth0, addresses: [10.1.0.2/24] }
    b: { netns: router, name: eth0, addresses: [10.1.0.1/24] }
  - a: { netns: server, name: eth0, addresses: [10.2.0.2/24] }
    b: { netns: router, name: eth1, addresses: [10.2.0.1/24] }
sockets:
  - { name: s9100, netns: server, port: 9100, uid: 0 }
  - { name: s9101, netns: server, port: 9101, uid: 0 }
attempts:
  - { name: skuid-on-forward, netns: client, address: 10.2.0.2, port: 9100, uid: 1000 }
  - { name: forward-drop, netns: client, address: 10.2.0.2, port: 9101, uid: 1000 }
`;
