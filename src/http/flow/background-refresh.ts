import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { LoaderError } from '../../shared/errors.js';
import { monotonicNow } from '../../shared/clock.js';
import { requestHost, UNKEYED_INPUT_HEADERS } from '../rules/cache-key.js';
import type { CapturedResponse, SharedResponse } from './capture.js';
import { revalidationHeaders } from '../rules/conditional.js';
import { headerValue } from '../rules/headers.js';
import { collectBody, type Replay, type ReplayRequest } from '../pipeline.js';
import type { ServableResponse } from './serve.js';
import type { CachePlan, LeaderRun } from './plan-types.js';
import type { ResponseWrites } from './response-writes.js';
import { hasValidator } from '../rules/response-store.js';
import { ORIGIN_ERROR_STATUSES } from './stale-on-error.js';

/** What a background refresh needs to know of the request that found the response stale. */
interface ReplaySource {
  url: string;
  /** The headers of the request that found the response stale. */
  headers: IncomingHttpHeaders;
  /** True when the key is the default one (built from the URL, `Host` and forwarding fields). */
  defaultKey: boolean;
  /** The user's `replayHeaders` (lower-case). */
  replayHeaders: readonly string[];
}

/**
 * The request a background refresh runs the handler with (see `ReplayRequest`): `host`; under
 * the default key, the forwarding fields it was built from; the `replayHeaders`; the fields
 * the stored response's `Vary` names, with the values it was stored for; and, when
 * `conditional`, the stored response's validators. Nothing else of the live request. A value
 * cache (no stored response) lists the route's `Vary` names among the `replayHeaders`.
 */
export function replayRequest(source: ReplaySource, stored?: ServableResponse, conditional = false): ReplayRequest {
  const headers: Record<string, string> = {};
  const host = requestHost(source.headers);
  if (host !== '') headers.host = host;
  if (source.defaultKey) {
    for (const name of UNKEYED_INPUT_HEADERS) {
      const value = headerValue(source.headers, name);
      if (value !== undefined) headers[name] = value;
    }
  }
  for (const name of source.replayHeaders) {
    const value = headerValue(source.headers, name);
    if (value !== undefined) headers[name] = value;
  }
  if (stored === undefined) return { method: 'GET', url: source.url, headers };
  for (const [name, value] of stored.vary) if (value !== undefined) headers[name] = value;
  if (conditional) Object.assign(headers, revalidationHeaders(stored.headerObject));
  return { method: 'GET', url: source.url, headers };
}

/** A replayed response read to its end, with the fields only this cache reads taken off it. */
interface ReplayedResponse {
  response: CapturedResponse;
  /** `Dogpile-Cache-Control`, if the handler set it. */
  targeted: string | undefined;
  /** `Dogpile-Tags`, if the handler set it. */
  tagged: string | undefined;
}

/**
 * Runs the handler for `request` through the adapter's `replay` and reads its response. An
 * origin failure (500, 502, 503, 504), like a rejection, throws: the refresh has failed, and
 * the cache answers it as a loader's failure (the stale response under `staleIfError`, retries
 * held for `failSafeRetry`).
 */
async function runReplay(replay: Replay, request: ReplayRequest, key: string, maxBodySize: number): Promise<ReplayedResponse> {
  const startedAt = monotonicNow();
  const answer = await replay(request);
  if (ORIGIN_ERROR_STATUSES.has(answer.status)) {
    throw new LoaderError(`the handler answered ${answer.status} to a background refresh`, { key });
  }
  const { chunks, tooBig } = await collectBody(answer.body, maxBodySize);
  const headers: OutgoingHttpHeaders = {};
  let targeted: string | undefined;
  let tagged: string | undefined;
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    const text = Array.isArray(value) ? value.join(', ') : String(value);
    if (lower === 'dogpile-cache-control') targeted = text;
    else if (lower === 'dogpile-tags') tagged = text;
    else headers[lower] = Array.isArray(value) ? value.map(String) : (value as string | number);
  }
  return { response: { status: answer.status, headers, tooBig, body: chunks, startedAt }, targeted, tagged };
}

/**
 * A refresh of `plan`'s stored response detached from every client: the handler runs through
 * `replay` for a request reconstructed from the stored response (conditional when it has a
 * validator), and its response is stored, renews the stored one (a 304), or is refused (stored
 * nowhere, the stale copy dropped). Resolves with what `writes` made of it.
 */
export async function refreshDetached(
  plan: CachePlan,
  stored: ServableResponse,
  replay: Replay,
  options: { readonly replayHeaders: readonly string[] | undefined; readonly maxBodySize: number },
  writes: ResponseWrites,
): Promise<SharedResponse | null> {
  const conditional = hasValidator(stored.headerObject);
  const source = { url: plan.url, headers: plan.headers, defaultKey: !plan.userKey, replayHeaders: options.replayHeaders ?? [] };
  const request = replayRequest(source, stored, conditional);
  const { response, targeted, tagged } = await runReplay(replay, request, plan.key, options.maxBodySize);
  // The run: the replayed request's headers, no client to answer, no stale stand-in (a failure throws).
  const run: LeaderRun = { plan: { ...plan, headers: request.headers }, conditional: {}, revalidating: conditional ? stored : undefined, fallback: undefined, targeted, tagged };
  return conditional ? writes.finishRevalidation(run, stored, response, false) : writes.finish(run, response);
}

/**
 * A refresh's loader, once the cache's answer to the request that started it is known: the
 * cache answers a request inside a stale window with the stale copy and runs the loader
 * detached from it (`answered()` is then true after the current turn of the event loop), and
 * `detached` runs the handler for a reconstructed request. Otherwise (past the window, or a
 * refresh in the foreground) the request waits for the run, and `foreground` runs its own
 * handler, as for a miss. Every adapter's background refresh starts here.
 */
export function refreshOnceAnswered<T>(answered: () => boolean, detached: () => Promise<T>, foreground: () => Promise<T>): Promise<T> {
  return new Promise<void>((resolve) => setImmediate(resolve)).then(() => (answered() ? detached() : foreground()));
}
