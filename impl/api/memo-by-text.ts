/**
 * A bounded memo of a pure function of one text: the node agent's repair loop reads every pod on
 * every pass and parses the same plan and iptables-save texts again and again. Results are shared
 * between callers, so they must be read-only (the memoized functions' types say so). When full,
 * the oldest entry goes first. A call that throws is not remembered.
 */
export function memoByText<T>(fn: (text: string) => T, max = 256): (text: string) => T {
  const cache = new Map<string, T>();
  return (text) => {
    const hit = cache.get(text);
    if (hit !== undefined) return hit;
    const value = fn(text);
    if (cache.size >= max) cache.delete(cache.keys().next().value as string);
    cache.set(text, value);
    return value;
  };
}
