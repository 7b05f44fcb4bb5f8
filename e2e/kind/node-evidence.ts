/**
 * What a kind node can tell about its pods, read on the node itself (`docker exec <node> sh -c`),
 * never inferred from the API: for every ready pod sandbox, its network namespace (inode) and
 * whether that namespace holds the mesh's redirection rules (iptables-save in the pod netns shows
 * the jump to the proxy's outbound port, as the netns world checks); and the node proxy's
 * /status (which pod uids it serves, with the identity `dev:inode` of the netns it received over
 * ZDS). A pod is `served` when the proxy serves its uid with its CURRENT netns inode.
 *
 * One shell script per node per observation; its output is line-oriented so it parses without
 * jq on the node (kindest/node has crictl, nsenter, stat, curl and both iptables backends).
 */

/** What one node reported. */
export interface NodeEvidence {
  /** Pod uid → its sandbox's netns inode and whether the redirection rules are in it. */
  readonly sandboxes: ReadonlyMap<string, { readonly netnsInode: string; readonly redirected: boolean }>;
  /** Pod uid → netns inode the proxy serves it with; undefined when the proxy did not answer. */
  readonly served: ReadonlyMap<string, string> | undefined;
  /** Lines the parser did not understand (kept for error messages). */
  readonly noise: readonly string[];
}

/** The outbound redirection, in either backend's save format (nat REDIRECT or mangle TPROXY). */
export const REDIRECTION_RULE = /--to-ports 15001\b|--on-port 15001\b/;

/**
 * The node script. Host-network sandboxes have no netns path and are skipped. Both iptables
 * backends are saved because kindest/node picks one with a wrapper, and the agent's image may use
 * the other (rules written with nft are invisible to iptables-legacy-save, and the reverse).
 */
export function nodeEvidenceScript(proxyStatusUrl: string): string {
  return [
    `printf 'al-status %s\\n' "$(curl -s --max-time 3 ${shellQuote(proxyStatusUrl)} | tr -d '\\n')"`,
    'for id in $(crictl pods -q --state ready); do',
    `  line=$(crictl inspectp -o go-template --template '{{.status.metadata.uid}} {{range .info.runtimeSpec.linux.namespaces}}{{if eq .type "network"}}{{.path}}{{end}}{{end}}' "$id" 2>/dev/null) || continue`,
    '  set -- $line',
    '  [ -n "$2" ] || continue',
    '  ino=$(stat -L -c %i "$2" 2>/dev/null) || continue',
    "  if nsenter --net=\"$2\" sh -c '{ iptables-nft-save; iptables-legacy-save; } 2>/dev/null' | grep -Eq -- '--to-ports 15001\\b|--on-port 15001\\b'; then r=1; else r=0; fi",
    '  printf \'al-pod %s %s %s\\n\' "$1" "$ino" "$r"',
    'done',
  ].join('\n');
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

interface ProxyStatus { readonly pods?: readonly { readonly uid?: unknown; readonly identity?: unknown }[] }

/** Parse the node script's output. */
export function parseNodeEvidence(out: string): NodeEvidence {
  const sandboxes = new Map<string, { netnsInode: string; redirected: boolean }>();
  let served: Map<string, string> | undefined;
  const noise: string[] = [];
  for (const line of out.split('\n')) {
    if (line.trim() === '') continue;
    const pod = /^al-pod (\S+) (\d+) ([01])$/.exec(line);
    if (pod) {
      sandboxes.set(pod[1]!, { netnsInode: pod[2]!, redirected: pod[3] === '1' });
      continue;
    }
    if (line.startsWith('al-status ')) {
      const body = line.slice('al-status '.length).trim();
      if (body === '') continue; // the proxy did not answer: nothing is served
      try {
        const st = JSON.parse(body) as ProxyStatus;
        served = new Map();
        for (const p of st.pods ?? []) {
          // identity is "dev:inode" of the netns the proxy holds
          if (typeof p.uid === 'string' && typeof p.identity === 'string') served.set(p.uid, p.identity.split(':').at(-1) ?? '');
        }
      } catch {
        noise.push(line);
      }
      continue;
    }
    noise.push(line);
  }
  return { sandboxes, served, noise };
}
