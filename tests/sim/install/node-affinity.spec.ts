/**
 * The installer's exit check with a DaemonSet whose required node affinity no longer selects
 * this node (upstream istio-cni ShouldStopCleanup): that is an uninstall here, not an upgrade —
 * no replacement will come to take the plugin over. impl/api/node-affinity.ts evaluates the
 * NodeSelector as the scheduler does; a malformed one is an error (the installer cannot say, and
 * leaves the plugin: fail closed).
 */
import { test, expect } from '@playwright/test';
import { nodeSelectorMatches, NodeSelectorError, type NodeFacts } from '../../../impl/api/node-affinity.js';
import { daemonSetOwnerState, decideUninstallOnExit } from '../../../impl/node-agent/install.js';
import { installerSettings } from '../../../impl/linux/cni-installer-config.js';
import { VirtualClock } from '../../../sim/time/virtual-clock.js';
import { MemoryLogger } from '../../../sim/log/memory-logger.js';
import { settle } from '../../../sim/time/settle.js';

const node: NodeFacts = { name: 'node-0', labels: { pool: 'mesh', zone: 'a', cores: '8' } };
const term = (...matchExpressions: unknown[]) => ({ nodeSelectorTerms: [{ matchExpressions }] });
const expr = (key: string, operator: string, values?: string[]) => ({ key, operator, ...(values ? { values } : {}) });

test('label operators: In, NotIn (true when absent), Exists, DoesNotExist, Gt and Lt (integers)', () => {
  const cases: [unknown, boolean][] = [
    [term(expr('pool', 'In', ['mesh', 'x'])), true],
    [term(expr('pool', 'In', ['other'])), false],
    [term(expr('pool', 'NotIn', ['other'])), true],
    [term(expr('pool', 'NotIn', ['mesh'])), false],
    [term(expr('missing', 'NotIn', ['mesh'])), true],
    [term(expr('zone', 'Exists')), true],
    [term(expr('missing', 'Exists')), false],
    [term(expr('missing', 'DoesNotExist')), true],
    [term(expr('zone', 'DoesNotExist')), false],
    [term(expr('cores', 'Gt', ['4'])), true],
    [term(expr('cores', 'Gt', ['8'])), false],
    [term(expr('cores', 'Lt', ['16'])), true],
    [term(expr('zone', 'Gt', ['1'])), false], // not an integer: false, as the scheduler
    [term(expr('missing', 'Lt', ['1'])), false],
  ];
  for (const [sel, want] of cases) expect(nodeSelectorMatches(sel, node), JSON.stringify(sel)).toBe(want);
});

test('terms are ORed, requirements within a term ANDed; an empty term or no terms match nothing; matchFields by name', () => {
  expect(nodeSelectorMatches(term(expr('pool', 'In', ['mesh']), expr('zone', 'In', ['b'])), node)).toBe(false);
  expect(
    nodeSelectorMatches(
      {
        nodeSelectorTerms: [
          { matchExpressions: [expr('zone', 'In', ['b'])] },
          { matchExpressions: [expr('zone', 'In', ['a'])] },
        ],
      },
      node,
    ),
  ).toBe(true);
  expect(nodeSelectorMatches({ nodeSelectorTerms: [{}] }, node)).toBe(false);
  expect(nodeSelectorMatches({ nodeSelectorTerms: [] }, node)).toBe(false);
  const byName = (op: string, names: string[]) => ({
    nodeSelectorTerms: [{ matchFields: [expr('metadata.name', op, names)] }],
  });
  expect(nodeSelectorMatches(byName('In', ['node-0']), node)).toBe(true);
  expect(nodeSelectorMatches(byName('NotIn', ['node-0']), node)).toBe(false);
  // A label named like the field does not count as the field.
  expect(nodeSelectorMatches(byName('In', ['node-0']), { name: 'node-1', labels: { 'metadata.name': 'node-0' } })).toBe(
    false,
  );
});

test('a malformed selector is an error naming the place, never a match or a miss', () => {
  const bad: [unknown, RegExp][] = [
    [{}, /nodeSelectorTerms: expected a list/],
    [term(expr('pool', 'Like', ['m'])), /operator: expected one of/],
    [term(expr('pool', 'In', [])), /In needs at least one value/],
    [term(expr('pool', 'Exists', ['x'])), /Exists takes no values/],
    [term(expr('cores', 'Gt', ['many'])), /Gt needs exactly one integer value/],
    [{ nodeSelectorTerms: [{ matchFields: [expr('metadata.labels', 'In', ['x'])] }] }, /only metadata.name/],
    [{ nodeSelectorTerms: [{ matchFields: [expr('metadata.name', 'Exists')] }] }, /only In and NotIn/],
    // An invalid term is an error even when an earlier term would match.
    [{ nodeSelectorTerms: [{ matchExpressions: [expr('pool', 'In', ['mesh'])] }, 'x'] }, /nodeSelectorTerms\[1\]/],
  ];
  for (const [sel, msg] of bad) {
    expect(() => nodeSelectorMatches(sel, node), JSON.stringify(sel)).toThrow(NodeSelectorError);
    expect(() => nodeSelectorMatches(sel, node)).toThrow(msg);
  }
});

const withAffinity = (sel: unknown) => ({
  affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: sel } },
});

test('the owner state: present without affinity (the node is not read), unscheduled when the affinity no longer selects the node', async () => {
  let reads = 0;
  const read = () => {
    reads++;
    return Promise.resolve(node);
  };
  expect(await daemonSetOwnerState({ deleting: false, podSpec: { containers: [] } }, read)).toBe('present');
  expect(
    await daemonSetOwnerState({ deleting: true, podSpec: withAffinity(term(expr('pool', 'In', ['x']))) }, read),
  ).toBe('deleting');
  expect(reads).toBe(0);
  expect(
    await daemonSetOwnerState({ deleting: false, podSpec: withAffinity(term(expr('pool', 'In', ['mesh']))) }, read),
  ).toBe('present');
  expect(
    await daemonSetOwnerState({ deleting: false, podSpec: withAffinity(term(expr('pool', 'In', ['gpu']))) }, read),
  ).toBe('unscheduled');
  expect(reads).toBe(2);
  await expect(
    daemonSetOwnerState({ deleting: false, podSpec: withAffinity(term(expr('pool', 'Like', ['m']))) }, read),
  ).rejects.toThrow(/required node affinity cannot be read/);
});

test('at exit: an unscheduled owner is an uninstall; an unreadable node leaves the plugin (fail closed)', async () => {
  const clock = new VirtualClock();
  const log = new MemoryLogger();
  const gone = await settle(
    clock,
    decideUninstallOnExit('when-daemonset-gone', { owner: () => Promise.resolve('unscheduled'), clock, log }),
  );
  expect(gone.uninstall).toBe(true);
  expect(gone.why).toContain('no longer selects this node');
  const unreadable = await settle(
    clock,
    decideUninstallOnExit('when-daemonset-gone', {
      owner: () =>
        daemonSetOwnerState({ deleting: false, podSpec: withAffinity(term(expr('pool', 'In', ['mesh']))) }, () =>
          Promise.reject(new Error('nodes "node-0" is forbidden')),
        ),
      clock,
      log,
    }),
  );
  expect(unreadable.uninstall).toBe(false);
  expect(unreadable.why).toContain('forbidden');
});

test('--node / AMBIENT_LAB_NODE: optional, read by the exit check', () => {
  expect(installerSettings([], {}).node).toBeUndefined();
  expect(installerSettings(['--node', 'node-3'], {}).node).toBe('node-3');
  expect(installerSettings([], { AMBIENT_LAB_NODE: 'node-4' }).node).toBe('node-4');
});
