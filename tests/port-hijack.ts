/**
 * The port hijack of docs/bypass-classes.md#finding-l as the world tests stage it, in any World:
 * what a capability-less app does to the proxy's inbound port, and what each profile must then
 * do with inbound plaintext (upstream's REDIRECT feeds the squatter; strict's TPROXY drops).
 */
import { expect } from '@playwright/test';
import type { ConnectResult, PodRef, Profile, World } from '../scenarios/world.js';

/** With the proxy down: IP_TRANSPARENT is EPERM without NET_RAW/NET_ADMIN, a plain listener binds. */
export async function squatInboundPortWithoutCapabilities(w: World, pod: PodRef): Promise<void> {
  if (!w.appExec) throw new Error('port hijack: this World has no appExec; run the test in a world that has it');
  const transparent = await w.appExec(pod, { kind: 'listen', port: 15006, transparent: true });
  expect(transparent.ok).toBe(false);
  expect(transparent.error).toContain('EPERM');
  expect(await w.appExec(pod, { kind: 'listen', port: 15006 })).toEqual({ ok: true });
}

/** Inbound plaintext after the squat: upstream delivers it to the app's 15006, strict to nobody. */
export function expectHijackVerdict(r: ConnectResult, profile: Profile, pod: PodRef): void {
  const d = r.deliveries.filter((x) => x.pod.name === pod.name && x.pod.namespace === pod.namespace);
  if (profile === 'upstream') {
    expect(r.acceptedBy, r.trace).toBe('app');
    expect(
      d.some((x) => x.port === 15006 && !x.viaProxy),
      r.trace,
    ).toBe(true);
  } else {
    expect(r.acceptedBy, r.trace).toBeUndefined();
    expect(d, r.trace).toEqual([]);
    expect(['timeout', 'refused'], r.trace).toContain(r.outcome);
  }
}
