import { AsyncLocalStorage } from 'node:async_hooks';
import {
  context,
  metrics,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type MeterProvider,
  type Span,
  type TracerProvider,
} from '@opentelemetry/api';
import { getOrComputeChannel, loaderChannel, lockChannel, type GetOrComputeTrace, type LoaderTrace, type LockTrace } from '../shared/diagnostics.js';
import { asGiven, fn, optionsObject, resolveFields, type OptionTable } from '../shared/option-table.js';
import { observeDiagnostics, outcomeLabel } from '../shared/observe.js';

export type { BackendErrorMessage, GetOrComputeTrace, HttpTrace, LoaderTrace, LockTrace, TraceLayer, TraceOutcome } from '../shared/diagnostics.js';
export { CHANNELS } from '../shared/diagnostics.js';

export interface InstrumentDogpileOptions {
  /** Where spans go. @default the global tracer provider (`trace.getTracerProvider()`) */
  tracerProvider?: TracerProvider;
  /** Where metrics go. @default the global meter provider (`metrics.getMeterProvider()`) */
  meterProvider?: MeterProvider;
  /**
   * Keys are not recorded (their number is unbounded). With this, the group a key belongs to
   * is recorded instead, as the attribute `dogpile_guard.key_group` on spans and metrics.
   */
  keyGroup?: (key: string) => string;
}

const SCOPE = 'dogpile-guard';

/** The options of `instrumentDogpile`, declared once; the global providers are read at the call. */
const INSTRUMENT_TABLE = {
  tracerProvider: { check: asGiven<TracerProvider>(), doc: 'where spans go (else the global tracer provider)' },
  meterProvider: { check: asGiven<MeterProvider>(), doc: 'where metrics go (else the global meter provider)' },
  keyGroup: { check: fn<(key: string) => string>('(key) => string'), doc: 'the group a key belongs to, recorded instead of the key' },
} satisfies OptionTable<InstrumentDogpileOptions>;

/**
 * Records spans (`cache.getOrCompute`, `cache.loader` as a child of the call that led it,
 * `cache.lock`) and metrics from the `dogpile-guard:*` diagnostics channels:
 * - `dogpile_guard.calls` (counter; `outcome`, `layer`),
 * - `dogpile_guard.loader.duration` (histogram, s; `background`, `outcome`),
 * - `dogpile_guard.wait.duration` (histogram, s: calls answered by another caller's loader),
 * - `dogpile_guard.refreshes` (counter; background refreshes, `outcome`),
 * - `dogpile_guard.fail_safe` (counter: stale values served because a refresh failed or Redis was down),
 * - `dogpile_guard.redis.errors` (counter; `operation`).
 * Returns the function that stops recording.
 */
export function instrumentDogpile(options: InstrumentDogpileOptions = {}): () => void {
  const { keyGroup, tracerProvider, meterProvider } = resolveFields(INSTRUMENT_TABLE, optionsObject(options));
  const tracer = (tracerProvider ?? trace.getTracerProvider()).getTracer(SCOPE);
  const meter = (meterProvider ?? metrics.getMeterProvider()).getMeter(SCOPE);

  const calls = meter.createCounter('dogpile_guard.calls', { description: 'Cache calls by outcome (hit, miss, coalesced, stale, pass, error) and layer' });
  const loaderDuration = meter.createHistogram('dogpile_guard.loader.duration', { description: 'Loader run time', unit: 's' });
  const waitDuration = meter.createHistogram('dogpile_guard.wait.duration', { description: "Time spent waiting for another caller's loader", unit: 's' });
  const refreshes = meter.createCounter('dogpile_guard.refreshes', { description: 'Background refreshes' });
  const failSafe = meter.createCounter('dogpile_guard.fail_safe', { description: 'Stale values served because a refresh failed or Redis was unreachable' });
  const redisErrors = meter.createCounter('dogpile_guard.redis.errors', { description: 'Failed or timed-out Redis commands' });

  const group = (key: string, into: Attributes): Attributes => {
    if (keyGroup) into['dogpile_guard.key_group'] = keyGroup(key);
    return into;
  };

  // The span of the operation a piece of code runs in (a loader runs in the async context of
  // the call that led it), kept by the channels' `start` with `bindStore`.
  const current = new AsyncLocalStorage<Span>();
  const spans = new WeakMap<object, Span>();
  const startSpan = (name: string, key: string, attributes: Attributes): Span => {
    const parent = current.getStore();
    const parentContext = parent ? trace.setSpan(context.active(), parent) : context.active();
    return tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes: group(key, attributes) }, parentContext);
  };
  const bind = (channel: typeof getOrComputeChannel | typeof loaderChannel | typeof lockChannel, name: string, attributes: (ctx: never) => Attributes) => {
    channel.start.bindStore(current, (ctx: object) => {
      const span = startSpan(name, (ctx as { key: string }).key, attributes(ctx as never));
      spans.set(ctx, span);
      return span;
    });
    return () => channel.start.unbindStore(current);
  };
  const finish = (ctx: object, attributes: Attributes) => {
    const span = spans.get(ctx);
    if (!span) return;
    spans.delete(ctx);
    span.setAttributes(attributes);
    const { error } = ctx as { error?: unknown };
    if (error !== undefined) {
      if (error instanceof Error) span.recordException(error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    }
    span.end();
  };

  const unbind = [
    bind(getOrComputeChannel, 'cache.getOrCompute', () => ({})),
    bind(loaderChannel, 'cache.loader', (ctx: LoaderTrace) => ({ 'dogpile_guard.background': ctx.background, 'dogpile_guard.degraded': ctx.degraded })),
    bind(lockChannel, 'cache.lock', (ctx: LockTrace) => ({ 'dogpile_guard.lock.operation': ctx.operation })),
  ];

  const unobserve = observeDiagnostics({
    call(ctx: GetOrComputeTrace) {
      const outcome = outcomeLabel(ctx);
      const attrs: Attributes = { 'dogpile_guard.outcome': outcome, 'dogpile_guard.degraded': ctx.degraded === true };
      if (ctx.layer) attrs['dogpile_guard.layer'] = ctx.layer;
      if (ctx.failSafe) attrs['dogpile_guard.fail_safe'] = true;
      finish(ctx, attrs);
      calls.add(1, group(ctx.key, { outcome, layer: ctx.layer ?? 'none' }));
      if (ctx.outcome === 'coalesced' && ctx.duration !== undefined) waitDuration.record(ctx.duration / 1000, group(ctx.key, {}));
      if (ctx.failSafe) failSafe.add(1, group(ctx.key, {}));
    },
    loader(ctx: LoaderTrace) {
      const outcome = ctx.error === undefined ? 'ok' : 'error';
      finish(ctx, { 'dogpile_guard.loader.duration_ms': ctx.duration ?? 0 });
      if (ctx.duration !== undefined) loaderDuration.record(ctx.duration / 1000, group(ctx.key, { background: ctx.background, outcome }));
      if (ctx.background) refreshes.add(1, group(ctx.key, { outcome }));
    },
    lock(ctx: LockTrace) {
      const attrs: Attributes = { 'dogpile_guard.lock.acquired': ctx.acquired === true };
      if (ctx.fencingToken !== undefined) attrs['dogpile_guard.lock.fencing_token'] = ctx.fencingToken;
      finish(ctx, attrs);
    },
    backendError(message) {
      redisErrors.add(1, { operation: message.operation });
    },
  });

  let disposed = false;
  return () => {
    if (disposed) return;
    disposed = true;
    unobserve();
    for (const u of unbind) u();
  };
}
