/**
 * The routes the agent and the proxy serve (http-endpoints.ts serves them), one builder per
 * concern, named and placed as upstream's (docs/observability.md has the side-by-side table):
 *   metrics    GET /metrics, GET /stats/prometheus           public
 *   readiness  GET <ready path> (200 / 503), GET /healthz     public
 *   status     GET /status (pods, caches, certificates)      loopback
 *   logging    GET /logging, POST /logging?level=L           loopback
 *   config     GET /config_dump                              loopback
 *   repair     POST /repair                                  unix
 */
import { json, text, type Reply, type Route } from './http-endpoints.js';
import { isLogLevel, LOG_LEVELS, type LogLevelControl } from './logger-pino.js';
import type { PromMetrics } from './metrics-prom.js';

export function metricsRoutes(metrics: PromMetrics): Route[] {
  const handle = async (): Promise<Reply> => ({ code: 200, type: metrics.contentType, body: await metrics.text() });
  return [
    { method: 'GET', path: '/metrics', reach: 'public', handle },
    // ztunnel's second name for the same text
    { method: 'GET', path: '/stats/prometheus', reach: 'public', handle },
  ];
}

/**
 * Readiness at `readyPath` (ztunnel /healthz/ready, istio-cni /readyz): 200 "ready" or 503 with
 * a one-line reason that names no pod. /healthz: 200 while the event loop answers (liveness).
 */
export function readinessRoutes(
  readyPath: string,
  ready: () => { readonly ready: boolean; readonly detail: string },
): Route[] {
  return [
    {
      method: 'GET',
      path: readyPath,
      reach: 'public',
      handle: () => {
        const r = ready();
        return text(r.ready ? 200 : 503, `${r.ready ? 'ready' : 'not ready'}: ${r.detail}\n`);
      },
    },
    { method: 'GET', path: '/healthz', reach: 'public', handle: () => text(200, 'ok\n') },
  ];
}

/** The component's state as JSON (pod uids, identities): for the harness and `ambient-lab status`. */
export function statusRoutes(status: () => unknown): Route[] {
  return [{ method: 'GET', path: '/status', reach: 'loopback', handle: () => json(status()) }];
}

/** The same readiness as text for a harness on the Unix socket: /readyz (200 / 503). */
export function readyzRoute(ready: () => { readonly ready: boolean; readonly detail: string }): Route {
  return {
    method: 'GET',
    path: '/readyz',
    reach: 'loopback',
    handle: () => {
      const r = ready();
      return text(r.ready ? 200 : 503, `${r.detail}\n`);
    },
  };
}

/**
 * The log level at run time, as ztunnel's admin /logging: GET shows it, POST ?level=L sets it
 * (debug, info, warn, error) for every logger of the process; anything else is a 400 that
 * changes nothing.
 */
export function loggingRoutes(control: LogLevelControl): Route[] {
  return [
    { method: 'GET', path: '/logging', reach: 'loopback', handle: () => json({ level: control.level }) },
    {
      method: 'POST',
      path: '/logging',
      reach: 'loopback',
      handle: (q) => {
        const level = q.get('level');
        if (level === null || !isLogLevel(level))
          return text(
            400,
            `POST /logging?level=L with L one of ${LOG_LEVELS.join(', ')}; got ${JSON.stringify(level)}\n`,
          );
        const before = control.level;
        control.set(level);
        return json({ level, before });
      },
    },
  ];
}

/** What the component runs with: workloads, policies, certificates (never keys), settings. */
export function configDumpRoutes(dump: () => unknown): Route[] {
  return [{ method: 'GET', path: '/config_dump', reach: 'loopback', handle: () => json(dump(), true) }];
}

/** The agent's operator action: run a repair pass now; answers with the passes so far. */
export function repairRoutes(repair: () => Promise<unknown>): Route[] {
  return [{ method: 'POST', path: '/repair', reach: 'unix', handle: async () => json(await repair()) }];
}
