import { types } from 'node:util';
import { InvalidOptionError } from '../shared/errors.js';
import { describe, type Duration } from '../shared/duration.js';
import { validateKeys } from './bulk.js';
import type { GetOrComputeOptions, LoaderContext } from './types.js';

/** What a batch loader is handed: the keys this process leads and loads in this call. */
export interface BatchLoaderContext {
  /** The keys to load: led by this call, in the order of the call's `keys` (no duplicates). */
  keys: string[];
  /** Aborts once the lead of every key of the batch is lost or past `hardTimeout`. */
  signal: AbortSignal;
}

/**
 * Loads many keys in one call: a `Map` of key → value, a plain object keyed by key, or an array
 * in the order of `ctx.keys`. A key left out is answered `undefined` and not stored.
 */
export type BatchLoader<T> = (keys: string[], ctx: BatchLoaderContext) => BatchResult<T> | Promise<BatchResult<T>>;
export type BatchResult<T> = ReadonlyMap<string, T> | Readonly<Record<string, T>> | readonly (T | undefined)[];

/** What a batch needs of the cache: the hits read together, and the one-key protocol for the rest. */
interface BatchHost {
  /** The keys answered as hits without the one-key protocol (a plain call's fast paths), with their values. */
  hits(keys: readonly string[]): Promise<ReadonlyMap<string, unknown>>;
  /** The one-key protocol (`resolve`), telling `onJoin` when the call waits for another caller's run instead of leading. */
  resolve<T>(key: string, loader: (ctx: LoaderContext) => Promise<T | undefined>, ttlOrOptions: Duration | GetOrComputeOptions<T | undefined>, onJoin: () => void): Promise<T | undefined>;
}

/** One key of a batch whose lead this process took: its loader waits for the batch's answer. */
interface Led {
  key: string;
  signal: AbortSignal;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * `getOrComputeMany`: first the hits found together (values fresh in process memory, then one
 * read of those this process believes fresh in Redis: `cache.hits`); every other key goes
 * through the one-key protocol at once (its look-up-or-lead script, in-process flights, waits,
 * stale answers), with a loader that does not load but enrols the key in a batch. Once every
 * key is accounted for — its lead taken (the loader was called), answered, or waiting for
 * another caller (the protocol tells the call's `onJoin`) — the keys led here
 * are loaded with one call of `loader`, and each key's lead stores its own value, so each key is
 * still loaded once fleet-wide. A key that is led later (its leader elsewhere died, a background
 * refresh) joins a next wave: the keys enrolled in one turn of the event loop, one call.
 */
export async function getOrComputeMany<T>(
  cache: BatchHost,
  keys: readonly string[],
  loader: BatchLoader<T>,
  ttlOrOptions: Duration | GetOrComputeOptions<T | undefined>,
): Promise<(T | undefined)[]> {
  // Every key is checked before any is looked up, led or written.
  validateKeys(keys);
  if (typeof loader !== 'function') throw new InvalidOptionError('loader', `expected a function (keys, ctx) => values, got ${loader === null ? 'null' : typeof loader}`);
  const all = [...new Set(keys)];
  if (all.length === 0) return [];
  // Hits found together (process memory, one read of Redis) are answered as they are; the rest
  // go through the one-key protocol.
  const hits = await cache.hits(all);
  const unique = hits.size === 0 ? all : all.filter((key) => !hits.has(key));
  if (unique.length === 0) return keys.map((key) => hits.get(key) as T | undefined);

  const order = new Map(unique.map((key, i) => [key, i]));
  const accounted = new Set<string>();
  let wave: Led[] = [];
  let firstWaveSent = false;
  let scheduled = false;

  const send = (): void => {
    scheduled = false;
    const batch = wave.sort((a, b) => order.get(a.key)! - order.get(b.key)!);
    wave = [];
    if (batch.length > 0) void load(batch, loader);
  };
  const account = (key: string): void => {
    if (firstWaveSent || accounted.has(key)) return;
    accounted.add(key);
    if (accounted.size === unique.length) {
      firstWaveSent = true;
      send();
    }
  };
  const enrol = (key: string) => (ctx: LoaderContext): Promise<T | undefined> =>
    new Promise<T | undefined>((resolve, reject) => {
      wave.push({ key, signal: ctx.signal, resolve: resolve as (value: unknown) => void, reject });
      if (!firstWaveSent) {
        account(key);
      } else if (!scheduled) {
        // A later lead (a takeover, a refresh): the keys enrolled in this turn go together.
        scheduled = true;
        setImmediate(send);
      }
    });

  // Settles once every key has: a failure of one key is thrown only when no key's flight
  // started here is still running (a call right after it starts afresh, not on a dying flight).
  const settled = await Promise.allSettled(
    unique.map((key) =>
      cache.resolve<T>(key, enrol(key), ttlOrOptions, () => account(key)).finally(() => account(key)),
    ),
  );
  const failed = settled.find((outcome) => outcome.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  const answers = settled.map((outcome) => (outcome as PromiseFulfilledResult<T | undefined>).value);
  const byKey = new Map<string, unknown>(hits);
  for (let i = 0; i < unique.length; i++) byKey.set(unique[i]!, answers[i]);
  return keys.map((key) => byKey.get(key) as T | undefined);
}

/** One call of the batch loader for the keys led in one wave; each key's lead gets its value. */
async function load<T>(batch: Led[], loader: BatchLoader<T>): Promise<void> {
  const keys = batch.map((led) => led.key);
  const controller = new AbortController();
  let live = batch.length;
  for (const led of batch) {
    const lost = (): void => {
      if (--live === 0) controller.abort(led.signal.reason);
    };
    if (led.signal.aborted) lost();
    else led.signal.addEventListener('abort', lost, { once: true });
  }
  let result: BatchResult<T>;
  try {
    result = await loader([...keys], { keys: [...keys], signal: controller.signal });
  } catch (error) {
    for (const led of batch) led.reject(error);
    return;
  }
  let values: (T | undefined)[];
  try {
    values = valuesOf(result, keys);
  } catch (error) {
    for (const led of batch) led.reject(error);
    return;
  }
  batch.forEach((led, i) => led.resolve(values[i]));
}

/**
 * The batch loader's answer, one value (or `undefined`) per key of `keys`. The one place that
 * decides what a batch loader may return: a `Map`, a plain object keyed by key (its prototype
 * `Object.prototype` or none), or an array in the order of `keys`. Anything else (a `Set`, a
 * Map-like object, a class instance, a typed array, a primitive) is refused, naming it.
 */
function valuesOf<T>(result: BatchResult<T>, keys: readonly string[]): (T | undefined)[] {
  if (Array.isArray(result)) {
    if (result.length !== keys.length) {
      throw new InvalidOptionError('loader', `returned an array of ${result.length} values for ${keys.length} keys; return one per key, in the order of ctx.keys, or a Map`);
    }
    return result as (T | undefined)[];
  }
  if (types.isMap(result)) return keys.map((key) => (result as ReadonlyMap<string, T>).get(key));
  if (isPlainObject(result)) {
    const record = result as Readonly<Record<string, T>>;
    return keys.map((key) => (Object.prototype.hasOwnProperty.call(record, key) ? record[key] : undefined));
  }
  throw new InvalidOptionError('loader', `returned ${returned(result)}; a batch loader returns a Map, a plain object keyed by key, or an array in the order of ctx.keys`);
}

/** An object literal or `Object.create(null)` (of any realm): its prototype is a root, or it has none. */
function isPlainObject(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value) as object | null;
  return proto === null || Object.getPrototypeOf(proto) === null;
}

/** What a loader returned, for an error message (a string by its length, not its text). */
function returned(value: unknown): string {
  if (typeof value === 'string') return `a string (${value.length} characters)`;
  if (typeof value === 'object' && value !== null) {
    const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
    if (types.isSet(value)) return 'a Set';
    return typeof name === 'string' && name !== '' ? `an instance of ${name}` : 'an object that is not a plain object';
  }
  return describe(value);
}
