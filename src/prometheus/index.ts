import { Counter, Histogram, register as defaultRegistry, type Registry } from 'prom-client';
import { InvalidOptionError } from '../shared/errors.js';
import { asGiven, optionsObject, resolveFields, type Check, type OptionTable } from '../shared/option-table.js';
import { observeDiagnostics, outcomeLabel } from '../shared/observe.js';

export type { BackendErrorMessage, GetOrComputeTrace, HttpTrace, LoaderTrace, LockTrace, TraceLayer, TraceOutcome } from '../shared/diagnostics.js';
export { CHANNELS } from '../shared/diagnostics.js';

export interface DogpileMetricsOptions {
  /** The registry the collectors are registered on. @default prom-client's default `register` */
  registry?: Registry;
  /** Prefix of every metric name. @default 'dogpile_guard_' */
  prefix?: string;
  /** Histogram buckets (seconds) of the loader and wait durations. @default [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] */
  buckets?: number[];
}

export interface DogpileMetrics {
  /** Stops recording and removes the collectors from the registry. */
  dispose(): void;
}

const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

const metricPrefix: Check<string> = (value, option) => {
  if (typeof value !== 'string' || !/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(value)) throw new InvalidOptionError(option, 'must be a valid Prometheus metric name prefix');
  return value;
};

const bucketList: Check<number[]> = (value, option) => {
  if (!Array.isArray(value) || value.length === 0 || value.some((b) => typeof b !== 'number' || !(b > 0))) {
    throw new InvalidOptionError(option, 'must be a non-empty array of positive numbers (seconds)');
  }
  return value as number[];
};

/** The options of `registerDogpileMetrics`, declared once. */
const METRICS_TABLE = {
  registry: { default: defaultRegistry, check: asGiven<Registry>(), doc: 'the registry the collectors are registered on' },
  prefix: { default: 'dogpile_guard_', check: metricPrefix, doc: 'prefix of every metric name' },
  buckets: { default: DEFAULT_BUCKETS, check: bucketList, doc: 'histogram buckets (seconds) of the loader and wait durations' },
} satisfies OptionTable<DogpileMetricsOptions>;

/**
 * Registers Prometheus collectors fed by the `dogpile-guard:*` diagnostics channels:
 * - `dogpile_guard_calls_total{outcome,layer}`: calls by outcome (`hit`, `miss`, `coalesced`,
 *   `stale`, `pass`, `error`) and layer (`l1`, `store`, `none` when no stored value answered);
 * - `dogpile_guard_loader_duration_seconds{background,outcome}`: loader run time;
 * - `dogpile_guard_wait_duration_seconds`: time calls spent waiting for another caller's loader;
 * - `dogpile_guard_refreshes_total{outcome}`: background refreshes;
 * - `dogpile_guard_fail_safe_total`: stale values served because a refresh failed or Redis was unreachable;
 * - `dogpile_guard_redis_errors_total{operation}`: failed or timed-out Redis commands.
 */
export function registerDogpileMetrics(options: DogpileMetricsOptions = {}): DogpileMetrics {
  const { registry, prefix, buckets } = resolveFields(METRICS_TABLE, optionsObject(options));
  const registers = [registry];

  const calls = new Counter({ name: `${prefix}calls_total`, help: 'Cache calls by outcome and layer', labelNames: ['outcome', 'layer'] as const, registers });
  const loaderDuration = new Histogram({
    name: `${prefix}loader_duration_seconds`,
    help: 'Loader run time',
    labelNames: ['background', 'outcome'] as const,
    buckets,
    registers,
  });
  const waitDuration = new Histogram({ name: `${prefix}wait_duration_seconds`, help: "Time calls spent waiting for another caller's loader", buckets, registers });
  const refreshes = new Counter({ name: `${prefix}refreshes_total`, help: 'Background refreshes', labelNames: ['outcome'] as const, registers });
  const failSafe = new Counter({ name: `${prefix}fail_safe_total`, help: 'Stale values served because a refresh failed or Redis was unreachable', registers });
  const redisErrors = new Counter({ name: `${prefix}redis_errors_total`, help: 'Failed or timed-out Redis commands', labelNames: ['operation'] as const, registers });
  const names = [calls, loaderDuration, waitDuration, refreshes, failSafe, redisErrors].map((m) => (m as unknown as { name: string }).name);

  const unobserve = observeDiagnostics({
    call(ctx) {
      calls.inc({ outcome: outcomeLabel(ctx), layer: ctx.layer ?? 'none' });
      if (ctx.outcome === 'coalesced' && ctx.duration !== undefined) waitDuration.observe(ctx.duration / 1000);
      if (ctx.failSafe) failSafe.inc();
    },
    loader(ctx) {
      const outcome = ctx.error === undefined ? 'ok' : 'error';
      if (ctx.duration !== undefined) loaderDuration.observe({ background: String(ctx.background), outcome }, ctx.duration / 1000);
      if (ctx.background) refreshes.inc({ outcome });
    },
    backendError(message) {
      redisErrors.inc({ operation: message.operation });
    },
  });

  let disposed = false;
  return {
    dispose() {
      if (disposed) return;
      disposed = true;
      unobserve();
      for (const name of names) registry.removeSingleMetric(name);
    },
  };
}
