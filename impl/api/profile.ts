/**
 * Rule profile names, shared by the node agent, the worlds, the scenarios and the cli:
 * `upstream` reproduces istio-cni's rules, `strict` is our hardened set (its choices are listed
 * in impl/node-agent/profiles.ts).
 */

export type Profile = 'upstream' | 'strict';
export const PROFILES: readonly Profile[] = ['upstream', 'strict'];
