/**
 * The check catalog: the properties of scenarios/properties grouped into matrix rows, the threat
 * models of scenarios/threats, both profiles, and the expected verdicts of scenarios/expected.
 */
import { BACKENDS, type Backend } from '../../impl/api/backend.js';
import { PROFILES, type Profile } from '../../impl/api/profile.js';
import { CONNECTION_PROPERTIES, PROPERTY_NAMES, STATE_PROPERTIES, type PropertyName } from '../properties/index.js';
import { THREATS, type ThreatId } from '../threats/threats.js';
import { expectedCell } from '../expected/table.js';
import type { CheckCatalog, CheckableProperty, ExpectedVerdict, ThreatSpec } from './contracts.js';

export function checkableProperties(): CheckableProperty[] {
  return PROPERTY_NAMES.map((name) => {
    const connection = CONNECTION_PROPERTIES.find((p) => p.name === name);
    const state = STATE_PROPERTIES.find((p) => p.name === name);
    const doc = connection?.doc ?? state?.doc ?? name;
    return { name, doc, ...(connection ? { connection } : {}), ...(state ? { state } : {}) };
  });
}

export function defaultCatalog(): CheckCatalog {
  const threats: ThreatSpec[] = THREATS.map((t) => ({
    id: t.id,
    title: t.title,
    uids: t.uids,
    ...(t.uidSource ? { uidSource: t.uidSource } : {}),
    caps: t.caps,
    kernelVersion: t.kernelVersion,
    hostAttacker: t.hostAttacker,
    outsideAttacker: t.outsideAttacker,
    vantage: t.vantage,
  }));
  return {
    properties: checkableProperties(),
    threats,
    profiles: PROFILES,
    backends: BACKENDS,
    expected(property: PropertyName, threat: string, profile: Profile, backend: Backend): ExpectedVerdict | undefined {
      if (!THREATS.some((t) => t.id === threat)) return undefined;
      const c = expectedCell(property, threat as ThreatId, profile, backend);
      return c.verdict === 'holds'
        ? { verdict: 'holds', why: c.why }
        : { verdict: 'bypass', why: c.why, classes: c.classes, ...(c.requires ? { requires: c.requires } : {}) };
    },
  };
}
