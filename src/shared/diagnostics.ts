import { channel, tracingChannel } from 'node:diagnostics_channel';
import { debuglog } from 'node:util';
import { monotonicNow } from './clock.js';

/**
 * What the library publishes for observers: Node's `diagnostics_channel` tracing channels
 * (`start`, `end`, `asyncStart`, `asyncEnd`, `error`), one plain channel for Redis errors, and
 * a `NODE_DEBUG=dogpile-guard` debug log. Nothing is built when nobody listens: every
 * publisher checks `hasSubscribers` first. The context fields below are a stable interface
 * (`dogpile-guard/otel` and `dogpile-guard/prometheus` are written against them).
 */

/** How a call was answered. */
export type TraceOutcome = 'hit' | 'miss' | 'coalesced' | 'stale' | 'pass';
/** Where a value was read: process memory (L1, or the embedded store) or the shared store. */
export type TraceLayer = 'l1' | 'store';

/** `dogpile-guard:getOrCompute`: one `getOrCompute()` / `resolve()` call. */
export interface GetOrComputeTrace {
  key: string;
  /** Set before `end`/`asyncEnd`; undefined when the call failed (then `error` is set). */
  outcome?: TraceOutcome;
  /** Where a `hit` or `stale` value was read; undefined for the other outcomes. */
  layer?: TraceLayer;
  /** True when Redis could not be used for this call. */
  degraded?: boolean;
  /** True when a stale value was served because its refresh failed or Redis was unreachable. */
  failSafe?: boolean;
  /** Milliseconds from the call to its answer (monotonic); for `coalesced`, the time spent waiting for another caller's loader. */
  duration?: number;
  /** Set by the channel when the call failed. */
  error?: unknown;
  /** Set by the channel: the call's answer (`CacheResult`). */
  result?: unknown;
}

/** `dogpile-guard:loader`: one run of a loader (as leader, without coordination, or as a background refresh). */
export interface LoaderTrace {
  key: string;
  /** True when the loader refreshes a value in the background while callers are served the stale one. */
  background: boolean;
  /** True when the loader runs because Redis could not be used (in-process single-flight only). */
  degraded: boolean;
  /** Milliseconds the loader took (monotonic), set before `end`/`asyncEnd`/`error`. */
  duration?: number;
  error?: unknown;
  result?: unknown;
}

/** `dogpile-guard:lock`: one `acquire()` / `tryAcquire()` of a `RedisLock` / `MemoryLock` (and so `withLock`). */
export interface LockTrace {
  /** The lock's name. */
  key: string;
  operation: 'acquire' | 'tryAcquire';
  /** Whether the lock was taken (false: `tryAcquire()` found it held; an `acquire()` that failed sets `error`). */
  acquired?: boolean;
  /** The fencing token of the acquisition. */
  fencingToken?: number;
  /** Milliseconds spent acquiring (monotonic). */
  duration?: number;
  error?: unknown;
  result?: unknown;
}

/** `dogpile-guard:http`: one request the HTTP guard (Express, Fastify, Nest) handles through the cache. */
export interface HttpTrace {
  key: string;
  method: string;
  outcome?: TraceOutcome;
  degraded?: boolean;
  duration?: number;
  error?: unknown;
  result?: unknown;
}

/** `dogpile-guard:backendError` (a plain channel): a Redis command failed or Redis was unusable. */
export interface BackendErrorMessage {
  key: string | undefined;
  operation: string;
  error: Error;
}

export const CHANNELS = {
  getOrCompute: 'dogpile-guard:getOrCompute',
  loader: 'dogpile-guard:loader',
  lock: 'dogpile-guard:lock',
  http: 'dogpile-guard:http',
  backendError: 'dogpile-guard:backendError',
} as const;

export const getOrComputeChannel = tracingChannel<unknown, GetOrComputeTrace>(CHANNELS.getOrCompute);
export const loaderChannel = tracingChannel<unknown, LoaderTrace>(CHANNELS.loader);
export const lockChannel = tracingChannel<unknown, LockTrace>(CHANNELS.lock);
export const httpChannel = tracingChannel<unknown, HttpTrace>(CHANNELS.http);
export const backendErrorChannel = channel(CHANNELS.backendError);

/** `NODE_DEBUG=dogpile-guard`: one line per decision. Check `debug.enabled` before formatting. */
export const debug = debuglog('dogpile-guard');

/** Traces one cache call; `layerOf` tells where a hit was read. Call only when `getOrComputeChannel.hasSubscribers`. */
export function traceCall<R extends { status: TraceOutcome; degraded: boolean }>(
  key: string,
  hitLayer: TraceLayer | undefined,
  run: () => Promise<R>,
): Promise<R> {
  const ctx: GetOrComputeTrace = { key, outcome: undefined, layer: undefined, degraded: undefined, failSafe: undefined, duration: undefined };
  const started = monotonicNow();
  return getOrComputeChannel.tracePromise(async () => {
    try {
      const answer = await run();
      ctx.outcome = answer.status;
      ctx.degraded = answer.degraded;
      if (answer.status === 'hit' || answer.status === 'stale') ctx.layer = hitLayer ?? 'store';
      // Served by fail-safe: a stale value because its refresh failed or Redis was unreachable.
      ctx.failSafe = (answer as { staleReason?: string }).staleReason === 'error';
      return answer;
    } finally {
      ctx.duration = monotonicNow() - started;
    }
  }, ctx);
}

/**
 * Publishes a hit answered synchronously from process memory: the same events as a traced
 * call (`start`, `end`, `asyncStart`, `asyncEnd`), without making the call asynchronous.
 * Call only when `getOrComputeChannel.hasSubscribers`.
 */
export function traceHit(key: string, layer: TraceLayer, result: unknown): void {
  const ctx: GetOrComputeTrace = { key, outcome: 'hit', layer, degraded: false, failSafe: false, duration: 0, result };
  getOrComputeChannel.start.runStores(ctx, () => undefined);
  getOrComputeChannel.end.publish(ctx);
  getOrComputeChannel.asyncStart.publish(ctx);
  getOrComputeChannel.asyncEnd.publish(ctx);
}

/** Runs a loader; traced on `dogpile-guard:loader` when someone listens. */
export function traceLoader<T>(key: string, background: boolean, degraded: boolean, run: () => T | Promise<T>): T | Promise<T> {
  if (!loaderChannel.hasSubscribers) return run();
  const ctx: LoaderTrace = { key, background, degraded, duration: undefined };
  const started = monotonicNow();
  return loaderChannel.tracePromise(async () => {
    try {
      return await run();
    } finally {
      ctx.duration = monotonicNow() - started;
    }
  }, ctx);
}

/** Traces one lock acquisition. Call only when `lockChannel.hasSubscribers`. */
export function traceLock(key: string, operation: LockTrace['operation'], run: () => Promise<number | false>): Promise<number | false> {
  const ctx: LockTrace = { key, operation, acquired: undefined, fencingToken: undefined, duration: undefined };
  const started = monotonicNow();
  return lockChannel.tracePromise(async () => {
    try {
      const token = await run();
      ctx.acquired = token !== false;
      if (token !== false) ctx.fencingToken = token;
      return token;
    } finally {
      ctx.duration = monotonicNow() - started;
    }
  }, ctx);
}

/** Traces one HTTP request through the cache. Call only when `httpChannel.hasSubscribers`. */
export function traceHttp<R extends { status: TraceOutcome; degraded: boolean }>(key: string, method: string, run: () => Promise<R>): Promise<R> {
  const ctx: HttpTrace = { key, method, outcome: undefined, degraded: undefined, duration: undefined };
  const started = monotonicNow();
  return httpChannel.tracePromise(async () => {
    try {
      const answer = await run();
      ctx.outcome = answer.status;
      ctx.degraded = answer.degraded;
      return answer;
    } finally {
      ctx.duration = monotonicNow() - started;
    }
  }, ctx);
}

export function publishBackendError(key: string | undefined, operation: string, error: Error): void {
  if (backendErrorChannel.hasSubscribers) backendErrorChannel.publish({ key, operation, error } satisfies BackendErrorMessage);
}

/**
 * A misconfiguration the library can see but not fix (the Fastify plugin registered after its
 * routes, ...): a process warning of type `DogpileWarning` with a `code` to filter on
 * (`process.on('warning')`, `--disable-warning=CODE`).
 */
export function warn(code: string, message: string): void {
  const proc = (globalThis as { process?: { emitWarning?: (message: string, options: { type: string; code: string }) => void } }).process;
  if (typeof proc?.emitWarning === 'function') proc.emitWarning(message, { type: 'DogpileWarning', code });
}
