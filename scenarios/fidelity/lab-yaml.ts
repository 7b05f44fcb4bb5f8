/**
 * Lab → lab-file YAML (docs/lab-file.md), so a shrunk counterexample can be saved as a fixture
 * and replayed with `ambient-lab trace FILE --kernel`. Only non-default fields are written.
 */
import { stringify } from 'yaml';
import type { Lab } from '../../sim/lab/lab-file.js';

const hex = (n: number): string => `0x${n.toString(16)}`;

function clean<T extends Record<string, unknown>>(o: T): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(o).filter(([, v]) => v !== undefined && v !== false && !(Array.isArray(v) && v.length === 0)),
  );
}

export function labToYaml(lab: Lab, comment?: string): string {
  const doc = {
    version: 1,
    kernel: lab.kernel,
    namespaces: lab.namespaces.map((n) =>
      clean({
        name: n.name,
        forwarding: n.forwarding[4] || n.forwarding[6] ? { ipv4: n.forwarding[4], ipv6: n.forwarding[6] } : undefined,
        links: n.links.map((l) =>
          clean({ name: l.name, kind: l.kind, addresses: l.addresses, up: l.up ? undefined : false }),
        ),
        routes: n.routes.map((r) =>
          clean({
            dst: r.dst,
            family: r.family,
            via: r.via,
            dev: r.dev,
            table: r.table,
            type: r.type === 'unicast' ? undefined : r.type,
            src: r.src,
            metric: r.metric,
          }),
        ),
        rules: n.rules.map((r) =>
          clean({
            family: r.family,
            priority: r.priority,
            fwmark: r.fwmark ? `${hex(r.fwmark.value)}/${hex(r.fwmark.mask)}` : undefined,
            from: r.from,
            to: r.to,
            iif: r.iif,
            oif: r.oif,
            table: r.table,
            action: r.action === 'lookup' ? undefined : r.action,
          }),
        ),
        ipsets: n.ipsets,
        iptables: n.iptables,
        ip6tables: n.ip6tables,
        nftables: n.nftables,
      }),
    ),
    veths: lab.veths.map((v) => ({ a: clean({ ...v.a }), b: clean({ ...v.b }) })),
    sockets: lab.sockets.map((s) =>
      clean({
        name: s.name,
        netns: s.netns,
        proto: s.proto,
        family: s.family,
        address: s.address,
        port: s.port,
        uid: s.uid,
        gid: s.gid === s.uid ? undefined : s.gid,
        caps: s.caps,
        mark: s.mark === undefined ? undefined : hex(s.mark),
        transparent: s.transparent,
        reuseport: s.reuseport,
        expect: s.expect === 'listening' ? undefined : s.expect,
      }),
    ),
    attempts: lab.attempts.map((a) =>
      clean({
        name: a.name,
        netns: a.netns,
        proto: a.proto,
        address: a.address,
        port: a.port,
        uid: a.uid,
        gid: a.gid === a.uid ? undefined : a.gid,
        caps: a.caps,
        mark: a.mark === undefined ? undefined : hex(a.mark),
        source: a.source,
        source_port: a.sourcePort,
        transparent: a.transparent,
        payload: a.payload === 'hello' ? undefined : a.payload,
        on_sockopt_error: a.onSockoptError === 'fail' ? undefined : a.onSockoptError,
      }),
    ),
  };
  const head = comment
    ? comment
        .split('\n')
        .map((l) => `# ${l}`)
        .join('\n') + '\n'
    : '';
  return head + stringify(doc, { lineWidth: 0 });
}
