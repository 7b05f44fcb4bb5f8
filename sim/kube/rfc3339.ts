/**
 * metav1.Time text: RFC 3339 with second precision, as the API server writes it. Every write
 * within one (virtual) second asks for the same text, so the last one is kept.
 */
let lastSecond = NaN;
let lastText = '';

/** The text for `epochMs + ms` (ms since 1970 at clock time 0, plus clock time). */
export function rfc3339Seconds(epochMs: number, ms: number): string {
  const second = Math.floor((epochMs + Math.floor(ms)) / 1000);
  if (second !== lastSecond) {
    lastText = new Date(second * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    lastSecond = second;
  }
  return lastText;
}
