/**
 * What a kind node can tell about its pods, read on the node itself (`docker exec <node> sh -c`),
 * never inferred from the API: for every ready pod sandbox, its network namespace (inode) and
 * whether that namespace holds the mesh's redirection rules (iptables-save in the pod netns shows
 * the jump to the proxy's outbound port, or — the nftables backend — `nft list ruleset` its
 * redirect, as the netns world checks); and the node proxy's
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
  /** Pod uid → netns inode the proxy serves it with; undefined when the proxy did not answer (see statusError). */
  readonly served: ReadonlyMap<string, string> | undefined;
  /** Why the proxy's /status could not be read (curl's exit code, or an empty answer); undefined when it answered. */
  readonly statusError: string | undefined;
  /** Pod uid → why its sandbox's rules could not be read (neither iptables backend could save them). */
  readonly unreadable: ReadonlyMap<string, string>;
  /** Lines the parser did not understand (kept for error messages). */
  readonly noise: readonly string[];
}

/**
 * The node script. Host-network sandboxes have no netns path and are skipped; so is a sandbox
 * that went away between the listing and its inspection (a real race, not a failed read). Both
 * iptables backends are saved because kindest/node picks one with a wrapper, and the agent's
 * image may use the other (rules written with nft are invisible to iptables-legacy-save, and the
 * reverse); when neither can save, the pod's line says so (`al-pod-unreadable`). A failing
 * `crictl pods` fails the script (exit 1); a proxy that does not answer is `al-status-error`.
 */
export function nodeEvidenceScript(proxyStatusUrl: string): string {
  return [
    `if st=$(curl -s --max-time 3 ${shellQuote(proxyStatusUrl)}); then printf 'al-status %s\\n' "$(printf '%s' "$st" | tr -d '\\n')"; else printf 'al-status-error curl exit %s\\n' "$?"; fi`,
    'ids=$(crictl pods -q --state ready) || { echo "crictl pods -q --state ready failed (exit $?)" >&2; exit 1; }',
    'for id in $ids; do',
    `  line=$(crictl inspectp -o go-template --template '{{.status.metadata.uid}} {{range .info.runtimeSpec.linux.namespaces}}{{if eq .type "network"}}{{.path}}{{end}}{{end}}' "$id" 2>/dev/null) || continue`,
    '  set -- $line',
    '  [ -n "$2" ] || continue',
    '  ino=$(stat -L -c %i "$2" 2>/dev/null) || continue',
    '  if ! rules=$(nsenter --net="$2" sh -c \'ok=1; iptables-nft-save 2>/dev/null && ok=0; iptables-legacy-save 2>/dev/null && ok=0; exit $ok\'); then',
    '    printf \'al-pod-unreadable %s neither iptables-nft-save nor iptables-legacy-save could read netns %s\\n\' "$1" "$2"',
    '    continue',
    '  fi',
    // The nftables backend writes no iptables: its redirect is in the nftables ruleset. A node
    // without nft cannot hold nftables rules the mesh wrote with its own nft, so its absence
    // reads as none; an nft that fails is an unreadable sandbox like a failing save.
    '  if command -v nft >/dev/null 2>&1; then',
    '    if ! nftrules=$(nsenter --net="$2" nft -s list ruleset 2>&1); then',
    '      printf \'al-pod-unreadable %s nft -s list ruleset failed in netns %s: %s\\n\' "$1" "$2" "$(printf \'%s\' "$nftrules" | head -n 1)"',
    '      continue',
    '    fi',
    '    rules="$rules',
    '$nftrules"',
    '  fi',
    "  if printf '%s\\n' \"$rules\" | grep -Eq -- '--to-ports 15001\\b|--on-port 15001\\b|redirect to :15001\\b'; then r=1; else r=0; fi",
    '  printf \'al-pod %s %s %s\\n\' "$1" "$ino" "$r"',
    'done',
  ].join('\n');
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

interface ProxyStatus {
  readonly pods?: readonly { readonly uid?: unknown; readonly identity?: unknown }[];
}

/**
 * Parse the node script's output. Output without the status line is not the script's (it did not
 * run, or its output was lost): that throws, rather than reading as "no sandboxes, nothing served".
 */
export function parseNodeEvidence(out: string, node = 'the node'): NodeEvidence {
  const sandboxes = new Map<string, { netnsInode: string; redirected: boolean }>();
  const unreadable = new Map<string, string>();
  let served: Map<string, string> | undefined;
  let statusError: string | undefined;
  let statusLine = false;
  const noise: string[] = [];
  for (const line of out.split('\n')) {
    if (line.trim() === '') continue;
    const pod = /^al-pod (\S+) (\d+) ([01])$/.exec(line);
    if (pod) {
      sandboxes.set(pod[1]!, { netnsInode: pod[2]!, redirected: pod[3] === '1' });
      continue;
    }
    const bad = /^al-pod-unreadable (\S+) (.*)$/.exec(line);
    if (bad) {
      unreadable.set(bad[1]!, bad[2]!);
      continue;
    }
    if (line.startsWith('al-status-error ')) {
      statusLine = true;
      statusError = line.slice('al-status-error '.length).trim();
      continue;
    }
    if (line.startsWith('al-status ')) {
      statusLine = true;
      const body = line.slice('al-status '.length).trim();
      if (body === '') {
        statusError = 'the proxy answered /status with nothing';
        continue;
      }
      try {
        const st = JSON.parse(body) as ProxyStatus;
        served = new Map();
        for (const p of st.pods ?? []) {
          // identity is "dev:inode" of the netns the proxy holds
          if (typeof p.uid === 'string' && typeof p.identity === 'string')
            served.set(p.uid, p.identity.split(':').at(-1) ?? '');
        }
      } catch {
        statusError = `the proxy's /status is not JSON: ${body.slice(0, 200)}`;
      }
      continue;
    }
    noise.push(line);
  }
  if (!statusLine)
    throw new Error(
      `the node evidence script on ${node} printed no status line (it did not run to completion?); output: ${out.trim().slice(0, 300) || '(nothing)'}`,
    );
  return { sandboxes, served, statusError, unreadable, noise };
}
