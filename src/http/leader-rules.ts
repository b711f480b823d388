import type { LoaderContext } from '../core/cache.js';
import { requestHost, userCacheKey } from './cache-key.js';
import { evaluateConditional, mergeNotModified, notModifiedHeaders } from './conditional.js';
import { type CapturedResponse, type SharedResponse } from './capture.js';
import { formatHttpDate } from './http-date.js';
import { defaultKeyInvalidation, invalidationTargets } from './invalidation.js';
import { keyAuthority } from './request-plan.js';
import { replayRequest, runReplay } from './background-refresh.js';
import type { Replay } from './pipeline.js';
import { routeWindow, staleInsteadOf } from './stale-on-error.js';
import { type PreparedResponse, type ServableResponse } from './serve.js';
import type { CachePlan, Exchange, HttpRequestInfo } from './plan-types.js';
import { ResponseStore, hasValidator } from './response-store.js';

/** The loader's verdict on a captured response (`ctx.decide`), and the value it resolves with. */
export function verdict(ctx: LoaderContext, shared: SharedResponse | null): Buffer | null {
  if (shared === null) {
    ctx.decide('private');
    return null;
  }
  ctx.decide(shared.decision);
  return shared.bytes;
}

/**
 * What the guard decides about a leader's response as its adapter sends it (`Cache-Status`, a
 * 304 to the client's own conditional request, the renewal by a 304, a stale stand-in for a
 * failure), the invalidation by writes, and the background refresh.
 */
export abstract class LeaderRules<Req> extends ResponseStore<Req> {
  /**
   * The headers of the leader's response are about to be sent: takes `Dogpile-Cache-Control`
   * off it (kept in the plan for the decision to store) and returns its `Cache-Status` member.
   * It says `stored` only when the response is what the capture will store: storable by its
   * headers as they are now, a body within `maxBodySize` (`bodySize`, else its
   * `Content-Length`), and, for a 304 to a revalidation, one that selects and renews the
   * stored response. What cannot be known yet can still keep it out of the store: headers
   * added after this point (another middleware's `writeHead` hook, such as a session cookie),
   * a body without a length that grows past `maxBodySize`, a stream that breaks, a store that
   * cannot be reached.
   */
  leaderHeaders(plan: CachePlan, status: number, headers: CapturedResponse['headers'], targeted: string | undefined, captured = true, bodySize?: number): string {
    if (targeted !== undefined) plan.targeted = targeted;
    if (!captured) return this.member({ fwd: 'miss' });
    if (plan.revalidating !== undefined && status === 304) {
      const renewed = this.renewal(plan, plan.revalidating, headers);
      return this.member(renewed === undefined ? { fwd: 'stale', fwdStatus: 304 } : { fwd: 'stale', fwdStatus: 304, stored: true });
    }
    const f = this.storable(plan, status, headers, bodySize);
    const fwd = plan.revalidating !== undefined ? 'stale' : 'miss';
    return this.member(f !== undefined ? { fwd, stored: true, ttl: f.ttl } : { fwd });
  }

  /**
   * True when the leader's client sent a conditional request that the full response its
   * handler produced satisfies: that client gets a 304 (RFC 9110 §13.2.2), the others and
   * the store the full response.
   */
  leaderNotModified(plan: CachePlan, status: number, headers: CapturedResponse['headers']): boolean {
    const conditional = plan.conditional;
    if (conditional === undefined || Object.keys(conditional).length === 0) return false;
    return evaluateConditional(conditional, headers, { method: 'GET', status }) === '304';
  }

  /**
   * The handler answered a revalidation with a 304 that selects the stored response (RFC 9111
   * §4.3.4): what its client gets instead, the stored response with its headers renewed.
   */
  revalidated304(plan: CachePlan, status: number, headers: CapturedResponse['headers']): { status: number; headers: Record<string, string | string[]>; body: Buffer } | undefined {
    const stored = plan.revalidating;
    if (stored === undefined || status !== 304) return undefined;
    const merged = mergeNotModified(stored.headerObject, headers);
    if (merged === undefined) return undefined;
    merged.date = formatHttpDate(Date.now());
    delete merged['dogpile-cache-control'];
    delete merged['content-length'];
    // The client's own conditional request, answered from the renewed response.
    const conditional = plan.conditional;
    if (conditional !== undefined && Object.keys(conditional).length > 0 && evaluateConditional(conditional, merged, { method: 'GET', status: stored.status }) === '304') {
      return { status: 304, headers: notModifiedHeaders(merged), body: Buffer.alloc(0) };
    }
    merged['content-length'] = String(stored.body.length);
    return { status: stored.status, headers: merged, body: stored.body };
  }

  /**
   * The handler's response to a refresh is an origin failure (a 500, 502, 503 or 504, the
   * framework's answer to a handler that threw included): the stored response its client gets
   * instead when its own `stale-if-error` window, else the route's `staleIfError`, allows it
   * (RFC 5861 §4), never one that forbids serving stale; else undefined. The adapter then fails
   * the capture, so the requests waiting for this run are served the same stale response.
   */
  staleOnError(plan: CachePlan, status: number): PreparedResponse | undefined {
    const window = routeWindow(plan.freshness, this.cache.options.freshness, 'staleIfError');
    return staleInsteadOf(status, plan.fallback, this.cache.now(), window, plan.conditional ?? {}, plan.head ? 'HEAD' : 'GET', (entry) => this.member(entry));
  }

  /**
   * Whether a refresh of this plan's stored response runs detached from its client, through the
   * adapter's `replay`: the `refresh` option says so, the adapter can, the request is a GET or
   * a HEAD that runs as one, and the pipeline can name every header the key depends on (a `key`
   * function needs `replayHeaders`).
   */
  protected refreshesInBackground(plan: CachePlan, exchange: Exchange): exchange is Exchange & { replay: Replay } {
    if (this.options.refresh !== 'background' || exchange.replay === undefined) return false;
    if ((plan.head && exchange.headAsGet !== true) || plan.lookupOnly === true) return false;
    return !plan.userKey || this.options.replayHeaders !== undefined;
  }

  /**
   * A refresh detached from every client: the handler runs for a request reconstructed from
   * the stored response (conditional when it has a validator), and its response is stored,
   * renews the stored one (a 304), or is refused (stored nowhere, the stale copy dropped).
   */
  protected async refreshDetached(plan: CachePlan, stored: ServableResponse, replay: Replay, ctx: LoaderContext): Promise<Buffer | null> {
    const conditional = hasValidator(stored.headerObject);
    const source = { url: plan.url, headers: plan.headers, defaultKey: !plan.userKey, replayHeaders: this.options.replayHeaders ?? [] };
    const request = replayRequest(source, stored, conditional);
    const { response, targeted, tagged } = await runReplay(replay, request, plan.key, this.options.maxBodySize);
    // The plan of the run: the replayed request's headers, no client to answer, no stale stand-in (a failure throws).
    const run: CachePlan = { ...plan, headers: request.headers, conditional: {}, fallback: undefined, revalidating: conditional ? stored : undefined };
    if (targeted !== undefined) run.targeted = targeted;
    if (tagged !== undefined) run.tagged = tagged;
    const shared = conditional ? this.finishRevalidation(run, stored, response, false) : this.finish(run, response);
    return verdict(ctx, shared);
  }

  /**
   * Deletes the stored GET responses (every `Vary` variant) of the URLs a successful unsafe
   * request invalidates (RFC 9111 §4.4): its own, and its `Location` / `Content-Location` on
   * the same host, whatever forwarding headers the write carried (`defaultKeyInvalidation`).
   * With a `key` function, the key of its own URL is what that function returns
   * for `req` seen as a GET (`method` reads 'GET'; URL, headers and everything else are the
   * request's own, so a key that includes the identity finds that client's entry); the
   * `Location` / `Content-Location` URLs are then left alone, since no request for them exists
   * to ask the function about. Never rejects.
   */
  async invalidate(info: HttpRequestInfo, status: number, responseHeaders: CapturedResponse['headers'], req?: Req): Promise<void> {
    const host = requestHost(info.headers);
    const targets = invalidationTargets(info.method, status, info.url, host, responseHeaders);
    if (targets.length === 0) return;
    const keyFn = this.options.key;
    let keys: string[];
    let tags: string[] = [];
    if (keyFn === undefined) {
      ({ keys, tags } = defaultKeyInvalidation(targets, info.headers, keyAuthority(info)));
      for (const key of keys) this.writingRecords.delete(key);
    } else {
      if (req === undefined) return;
      let k: unknown;
      try {
        k = keyFn(readAsGet(req));
      } catch {
        // A key function that cannot answer for the GET view has nothing to invalidate.
        return;
      }
      keys = typeof k === 'string' && k !== '' ? [userCacheKey(k)] : [];
      for (const key of keys) this.writingRecords.delete(key);
    }
    await Promise.all([...keys.map((key) => this.cache.delete(key).catch(() => false)), tags.length === 0 ? undefined : this.cache.invalidateTags(tags).catch(() => undefined)]);
  }

}

/**
 * The request as a `key` function would see a GET of the same URL: `method` reads 'GET', all
 * else is the request (methods are called on the request itself).
 */
function readAsGet<Req>(req: Req): Req {
  if (req === null || typeof req !== 'object') return req;
  return new Proxy(req as object, {
    get(target, property) {
      if (property === 'method') return 'GET';
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  }) as Req;
}
