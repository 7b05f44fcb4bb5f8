/**
 * The one rule for which HBONE transport a proxy runs (impl/linux/hbone-choice.ts): the proxy
 * main's --hbone, the bench and the real-kernel mesh fixture's HBONE= all go through it.
 */
import { test, expect } from '@playwright/test';
import { parseHboneKind, resolveHbone } from '../../../impl/linux/hbone-choice.js';
import { NativeHbone } from '../../../impl/linux/hbone-native.js';

test('auto picks the native tunnel exactly when its addon loads; tls is always tls; bad text is refused by name', () => {
  const native = NativeHbone.available();
  expect(resolveHbone('tls')).toEqual({ use: 'tls' });
  expect(resolveHbone('auto')).toEqual(native.ok ? { use: 'native' } : { use: 'tls', fallbackReason: native.reason });
  if (native.ok) expect(resolveHbone('native')).toEqual({ use: 'native' });
  else expect(() => resolveHbone('native')).toThrow(native.reason);
  expect([parseHboneKind(undefined, 'x'), parseHboneKind('', 'x'), parseHboneKind('tls', 'x')]).toEqual([
    'auto',
    'auto',
    'tls',
  ]);
  expect(() => parseHboneKind('quic', 'HBONE env')).toThrow(
    /HBONE env: HBONE transport must be one of auto, native, tls \(got "quic"\)/,
  );
});
