/** The Metrics port in memory: values by name and label set, for the sim and assertions. */
import type { Counter, Gauge, Histogram, MetricLabels, Metrics } from '../../impl/host/metrics.js';

const key = (labels: MetricLabels | undefined): string => JSON.stringify(Object.entries(labels ?? {}).sort());

export class MemoryMetrics implements Metrics {
  readonly values = new Map<string, Map<string, number>>();
  /** Histogram observations by name and label set, in order. */
  readonly observed = new Map<string, Map<string, number[]>>();

  private series(name: string): Map<string, number> {
    let m = this.values.get(name);
    if (!m) this.values.set(name, (m = new Map()));
    return m;
  }

  counter(name: string): Counter {
    const s = this.series(name);
    return {
      inc: (labels, by = 1) => {
        const k = key(labels);
        s.set(k, (s.get(k) ?? 0) + by);
      },
    };
  }

  gauge(name: string): Gauge {
    const s = this.series(name);
    return {
      set: (v, labels) => {
        s.set(key(labels), v);
      },
    };
  }

  histogram(name: string): Histogram {
    let m = this.observed.get(name);
    if (!m) this.observed.set(name, (m = new Map()));
    const series = m;
    return {
      observe: (v, labels) => {
        const k = key(labels);
        series.set(k, [...(series.get(k) ?? []), v]);
      },
    };
  }

  /** A histogram's observations (empty when never observed). */
  observations(name: string, labels?: MetricLabels): readonly number[] {
    return this.observed.get(name)?.get(key(labels)) ?? [];
  }

  /** Value of a series (0 when never touched). */
  get(name: string, labels?: MetricLabels): number {
    return this.values.get(name)?.get(key(labels)) ?? 0;
  }
}
