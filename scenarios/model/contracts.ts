/**
 * What the model-based runner needs from threat models and the expected verdict table, and how
 * it groups the properties of scenarios/properties into matrix rows. catalog.ts adapts the
 * threats and expected-table modules to these shapes, so the runner never depends on their
 * details.
 */
import type { Backend } from '../../impl/api/backend.js';
import type {
  AppCapability,
  ConnectOptions,
  ConnectResult,
  Destination,
  Profile,
  Source,
  UidSource,
} from '../world.js';
import type { ConnectionProperty, PropertyName, StateProperty, Violation } from '../properties/index.js';

/** One connection attempt as the run saw it (its trace is the counterexample's packet trace). */
export interface AttemptRecord {
  readonly from: Source;
  readonly to: Destination;
  readonly opts: ConnectOptions;
  readonly result: ConnectResult;
}

/** A broken property with the attempt that broke it, when a connection did. */
export interface RunViolation {
  readonly violation: Violation;
  readonly attempt?: AttemptRecord;
}

/** One matrix row: a property's connection and/or state checks under one name. */
export interface CheckableProperty {
  readonly name: PropertyName;
  readonly doc: string;
  readonly connection?: ConnectionProperty;
  readonly state?: StateProperty;
}

/** What a threat model lets the attacker do; the generators only draw what it allows. */
export interface ThreatSpec {
  readonly id: string;
  readonly title: string;
  /** uids the app may run as (at least one). */
  readonly uids: readonly number[];
  /** How the app's uid is set (AppSpec.uidSource); absent: declared as runAsUser. */
  readonly uidSource?: UidSource;
  readonly caps: readonly AppCapability[];
  readonly kernelVersion: string;
  /** Host processes (and hostNetwork pods) are attackers too. */
  readonly hostAttacker: boolean;
  /** Clients outside the cluster. */
  readonly outsideAttacker: boolean;
  /**
   * Where the attacker's connections start: an enrolled pod's app, a host process on a node,
   * an unenrolled pod (on another node), or outside. Connect draws sources from here only, so a
   * cell judges what that attacker can do (the expected table is written that way).
   */
  readonly vantage: 'enrolled-pod' | 'same-node-host' | 'other-node' | 'outside';
}

type Verdict = 'holds' | 'bypass';

/** The recorded expectation of one matrix cell. */
export interface ExpectedVerdict {
  readonly verdict: Verdict;
  /** Why (a finding's explanation, or the guarantee's reason). */
  readonly why: string;
  /** Bypass classes the table names (docs/bypass-classes.md). */
  readonly classes?: readonly string[];
  /** The bypass needs an attacker action the World interface does not offer (e.g. running code in the app). */
  readonly requires?: string;
}

export interface CheckCatalog {
  readonly properties: readonly CheckableProperty[];
  readonly threats: readonly ThreatSpec[];
  readonly profiles: readonly Profile[];
  readonly backends: readonly Backend[];
  expected(property: PropertyName, threat: string, profile: Profile, backend: Backend): ExpectedVerdict | undefined;
}
