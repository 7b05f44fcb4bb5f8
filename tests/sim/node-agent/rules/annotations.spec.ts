/**
 * Strict validation of the rule-shaping pod annotations: hostile values are rejected with an
 * error naming the annotation and the escaped value, and no rule text is produced from them.
 */
import { test, expect } from '@playwright/test';
import {
  AnnotationError,
  BYPASS_INBOUND_CAPTURE,
  DNS_CAPTURE,
  REROUTE_VIRTUAL_INTERFACES,
  interfaceName,
  parsePodRedirectionAnnotations,
  parseRedirectionStatus,
} from '../../../../impl/api/annotations.js';
import { DATAPLANE_MODE, readDataplaneMode } from '../../../../impl/api/labels.js';
import { buildInpodPlan, inpodCommonOptions } from '../../../../impl/node-agent/rule-builder.js';

const GLOBALS = { ipv6: true, dnsCapture: true };

/** The node agent's path: validate annotations, then build; a throw means no plan at all. */
function planFor(annotations: Record<string, string>): string {
  const opts = inpodCommonOptions(parsePodRedirectionAnnotations(annotations), GLOBALS);
  const p = buildInpodPlan({ ...opts, profile: 'upstream' });
  return `${p.iptables.ipv4 ?? ''}${p.iptables.ipv6 ?? ''}`;
}

function rejection(annotations: Record<string, string>): AnnotationError {
  let text: string | undefined;
  try {
    text = planFor(annotations);
  } catch (e) {
    expect(e).toBeInstanceOf(AnnotationError);
    return e as AnnotationError;
  }
  throw new Error(`expected a rejection, got rule text:\n${text}`);
}

const HOSTILE_INTERFACES: [string, string][] = [
  ['newline', 'tun0\n-A ISTIO_OUTPUT -j ACCEPT'],
  ['carriage return', 'tun0\r'],
  ['space', 'tun0 tun1'],
  ['option injection', '--dport 1 -j ACCEPT'],
  ['leading dash', '-j'],
  ['negation', '!tun0'],
  ['iptables wildcard', 'tun+'],
  ['unicode', 'tün0'],
  ['unicode lookalike dash', 'tun\u20130'],
  ['NUL', 'tun\u00000'],
  ['overlong (16 chars)', 'abcdefghijklmnop'],
  ['very long', 'x'.repeat(10_000)],
  ['empty', ''],
  ['empty item', 'tun0,,tun1'],
  ['trailing comma', 'tun0,'],
  ['space after comma', 'tun0, tun1'],
  ['duplicate', 'tun0,tun0'],
  ['slash', 'a/b'],
  ['colon', 'eth0:1'],
  ['loopback', 'lo'],
  ['too many', Array.from({ length: 17 }, (_, i) => `t${i}`).join(',')],
];

for (const [what, value] of HOSTILE_INTERFACES) {
  test(`${REROUTE_VIRTUAL_INTERFACES}: ${what} is rejected, naming the annotation and the value, with no rule text`, () => {
    const e = rejection({ [REROUTE_VIRTUAL_INTERFACES]: value });
    expect(e.annotation).toBe(REROUTE_VIRTUAL_INTERFACES);
    expect(e.value).toBe(value);
    expect(e.message).toContain(REROUTE_VIRTUAL_INTERFACES);
    expect(e.message).toContain('expected comma-separated interface names');
    // The message is one printable line, whatever the value held.
    expect(e.message).toMatch(/^[\x20-\x7e…]+$/);
    expect(e.message.length).toBeLessThan(400);
  });
}

const HOSTILE_BOOLEANS = ['True', 'TRUE', ' true', 'true ', 'true\n', 'yes', '1', '', 'false\n-j ACCEPT', 'ｔrue'];
for (const ann of [BYPASS_INBOUND_CAPTURE, DNS_CAPTURE]) {
  for (const value of HOSTILE_BOOLEANS) {
    test(`${ann}: ${JSON.stringify(value)} is rejected (booleans are exactly "true" or "false")`, () => {
      const e = rejection({ [ann]: value });
      expect(e.annotation).toBe(ann);
      expect(e.message).toContain(`pod annotation ${ann}`);
      expect(e.message).toContain('expected exactly "true" or "false"');
    });
  }
}

test('valid values shape the rules: interface list, ingress mode, DNS override', () => {
  const text = planFor({
    [REROUTE_VIRTUAL_INTERFACES]: 'tun0,wg-1.a',
    [BYPASS_INBOUND_CAPTURE]: 'true',
    [DNS_CAPTURE]: 'false',
  });
  expect(text).toContain('-A ISTIO_PRERT -i tun0 -p tcp -j REDIRECT --to-ports 15001');
  expect(text).toContain('-A ISTIO_PRERT -i wg-1.a -p tcp -j RETURN');
  expect(text).not.toContain('--to-ports 15006');
  expect(text).not.toContain('15053');
  expect(planFor({ [BYPASS_INBOUND_CAPTURE]: 'false' })).toContain('--to-ports 15006');
  // The pod's DNS annotation overrides the global setting in both directions.
  const off = inpodCommonOptions(parsePodRedirectionAnnotations({}), { ipv6: true, dnsCapture: false });
  expect(off.dnsCapture).toBe(false);
  expect(
    inpodCommonOptions(parsePodRedirectionAnnotations({ [DNS_CAPTURE]: 'true' }), { ipv6: true, dnsCapture: false })
      .dnsCapture,
  ).toBe(true);
});

test('absent annotations mean defaults; unrelated annotations are ignored', () => {
  expect(parsePodRedirectionAnnotations({ 'example.com/x': 'anything\n' })).toEqual({
    bypassInboundCapture: false,
    dnsCapture: undefined,
    virtualInterfaces: [],
  });
  expect(parsePodRedirectionAnnotations(undefined)).toEqual({
    bypassInboundCapture: false,
    dnsCapture: undefined,
    virtualInterfaces: [],
  });
});

test('interfaceName() used directly also refuses unsafe names', () => {
  expect(() => interfaceName('eth0 -j ACCEPT')).toThrow(/contains " "/);
  expect(() => interfaceName('-i')).toThrow(/must start with a letter or digit/);
  expect(interfaceName('eth0')).toBe('eth0');
});

test('status annotation and dataplane-mode label readers', () => {
  expect(parseRedirectionStatus('enabled')).toBe('enabled');
  expect(parseRedirectionStatus(undefined)).toBeUndefined();
  expect(() => parseRedirectionStatus('disabled')).toThrow(/ambient\.istio\.io\/redirection/);
  expect(readDataplaneMode({ [DATAPLANE_MODE]: 'ambient' })).toEqual({ kind: 'ambient' });
  expect(readDataplaneMode({ [DATAPLANE_MODE]: 'none' })).toEqual({ kind: 'none' });
  expect(readDataplaneMode({})).toEqual({ kind: 'absent' });
  expect(readDataplaneMode({ [DATAPLANE_MODE]: 'Ambient' })).toEqual({ kind: 'unrecognized', value: 'Ambient' });
});
