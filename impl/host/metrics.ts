/**
 * The metrics port: counters, gauges and histograms with labels, exported by the Linux adapter as
 * Prometheus text (prom-client) and kept in memory in the sim. Types only.
 */
export type MetricLabels = Readonly<Record<string, string>>;

export interface Counter {
  inc(labels?: MetricLabels, by?: number): void;
}

export interface Gauge {
  set(value: number, labels?: MetricLabels): void;
}

export interface Histogram {
  observe(value: number, labels?: MetricLabels): void;
}

export interface Metrics {
  counter(name: string, help: string, labelNames?: readonly string[]): Counter;
  gauge(name: string, help: string, labelNames?: readonly string[]): Gauge;
  /** Observations counted into `buckets` (upper bounds, ascending), with their sum and count. */
  histogram(name: string, help: string, buckets: readonly number[], labelNames?: readonly string[]): Histogram;
}
