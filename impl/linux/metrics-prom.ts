/**
 * Real adapter of the Metrics port: prom-client metrics in a private registry (text exposition),
 * with prom-client's default process metrics (process_*, nodejs_*: CPU, memory, heap, event-loop
 * lag, handles, GC), as upstream's components export their process's.
 */
import {
  collectDefaultMetrics,
  Counter as PromCounter,
  Gauge as PromGauge,
  Histogram as PromHistogram,
  Registry,
} from 'prom-client';
import type { Counter, Gauge, Histogram, MetricLabels, Metrics } from '../host/metrics.js';

export class PromMetrics implements Metrics {
  readonly registry = new Registry();
  private readonly counters = new Map<string, PromCounter>();
  private readonly gauges = new Map<string, PromGauge>();
  private readonly histograms = new Map<string, PromHistogram>();

  constructor(opts: { readonly processMetrics?: boolean } = {}) {
    if (opts.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    let c = this.counters.get(name);
    if (!c) {
      c = new PromCounter({ name, help, labelNames: [...labelNames], registers: [this.registry] });
      this.counters.set(name, c);
    }
    const m = c;
    return { inc: (labels: MetricLabels = {}, by = 1) => m.inc({ ...labels }, by) };
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    let g = this.gauges.get(name);
    if (!g) {
      g = new PromGauge({ name, help, labelNames: [...labelNames], registers: [this.registry] });
      this.gauges.set(name, g);
    }
    const m = g;
    return { set: (value: number, labels: MetricLabels = {}) => m.set({ ...labels }, value) };
  }

  histogram(name: string, help: string, buckets: readonly number[], labelNames: readonly string[] = []): Histogram {
    let h = this.histograms.get(name);
    if (!h) {
      h = new PromHistogram({
        name,
        help,
        buckets: [...buckets],
        labelNames: [...labelNames],
        registers: [this.registry],
      });
      this.histograms.set(name, h);
    }
    const m = h;
    return { observe: (value: number, labels: MetricLabels = {}) => m.observe({ ...labels }, value) };
  }

  /** Prometheus text format. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
