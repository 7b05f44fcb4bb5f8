/**
 * Convergence: after quiescence with healthy components, the pods carrying redirection are
 * exactly the pods the reference enrollment model selects, each served by its node proxy, and
 * the status annotation tells the truth (`enabled` iff redirected and served; absent otherwise).
 * Nodes whose agent or proxy is down are skipped: they cannot converge (fail-closed covers them).
 */
import { podKey, type PodObservation } from '../world.js';
import { selectionOf } from './enrollment-model.js';
import { violation, type ClusterContext, type StateProperty, type Violation } from './types.js';

function convergenceViolations(pods: readonly PodObservation[], ctx: ClusterContext): Violation[] {
  if (!ctx.quiescent) return [];
  const out: Violation[] = [];
  for (const p of pods) {
    const c = ctx.components[p.node];
    if (c && (c.agent === 'down' || c.proxy === 'down')) continue;
    if (!p.started) continue;
    const sel = selectionOf(p, ctx);
    const ev = { pod: p, selection: sel };
    if (sel.selected && !p.redirected)
      out.push(
        violation('convergence', `${podKey(p)} should be enrolled (${sel.why}) but its netns has no redirection`, ev),
      );
    if (sel.selected && !p.served)
      out.push(
        violation(
          'convergence',
          `${podKey(p)} should be enrolled (${sel.why}) but the node proxy does not serve it`,
          ev,
        ),
      );
    if (!sel.selected && p.redirected)
      out.push(
        violation('convergence', `${podKey(p)} carries redirection but should not be enrolled (${sel.why})`, ev),
      );
    const truth = p.redirected && p.served;
    if (p.annotation === 'enabled' && !truth)
      out.push(
        violation(
          'convergence',
          `${podKey(p)} is annotated enabled but is ${p.redirected ? '' : 'not redirected '}${p.served ? '' : 'not served'}`.trim(),
          ev,
        ),
      );
    if (p.annotation !== 'enabled' && truth && sel.selected)
      out.push(
        violation('convergence', `${podKey(p)} is enrolled but its annotation says ${p.annotation ?? '(absent)'}`, ev),
      );
    if (p.annotation !== undefined && !sel.selected)
      out.push(
        violation('convergence', `${podKey(p)} is not selected (${sel.why}) but still annotated ${p.annotation}`, ev),
      );
  }
  return out;
}

export const convergence: StateProperty = {
  name: 'convergence',
  doc: 'after quiescence the redirected pods are exactly the selected ones, served by the proxy, and the status annotation tells the truth',
  check: convergenceViolations,
};
