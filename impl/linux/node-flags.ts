/**
 * Node.js (V8) flags the node proxy process runs with, wherever it is started (the DaemonSet
 * command in deploy/base/proxy.yaml, the netns world, the bench).
 *
 * --initial-heap-size: every relayed chunk of an HBONE stream is a fresh Buffer (socket reads,
 * HTTP/2 DATA pieces), and V8 counts that external memory against a heap whose limit starts
 * near the proxy's small live heap (≈10 MB), so it ran a full mark-compact about every 100 ms
 * under load: 13 % of the proxies' CPU in perf, 3–5 → 3.4 ms proxy CPU per MiB and ≈ +25 %
 * HBONE throughput without it (bench:ztunnel, 2026-11-29). The young generation still frees
 * the Buffers; the flag only raises the point where V8 starts a full collection (memory is
 * committed as used, not reserved up front).
 *
 * --no-memory-reducer: V8's memory reducer waits for the process to go quiet after allocating
 * (new connections: handshakes, certificates, policy checks) and then runs up to three full
 * collections ~0.5 s apart to shrink the heap. For a proxy whose established connections are
 * relayed without JavaScript, "quiet" is its normal state under load, and each of those
 * collections put V8's helper threads on every CPU for 2-6 ms: stalls for every relayed
 * connection and for the node's other processes (HBONE p99.9 8-13 ms -> 3-5 ms at 1000 rps,
 * bench:ztunnel, perf sched, 2026-11-29). The price is a heap that is not shrunk after a burst
 * of new connections; it is still collected whenever it grows.
 */
export const PROXY_NODE_FLAGS: readonly string[] = ['--initial-heap-size=256', '--no-memory-reducer'];
