import type { IncomingHttpHeaders } from 'node:http';
import type { FreshnessOptions } from '../../core/freshness.js';
import type { ResponseCapture } from './capture.js';
import type { Replay } from '../pipeline.js';
import type { PreparedResponse, ServableResponse } from './serve.js';
import type { VaryRecord } from '../rules/vary-record.js';

/** The parts of a request the cache looks at. */
export interface HttpRequestInfo {
  method: string;
  /** Path and query as received (Express: `req.originalUrl`; Fastify: `request.url`). */
  url: string;
  headers: IncomingHttpHeaders;
  /**
   * What the key is built from instead of the `Host` field, when the handler sees more than it:
   * a web adapter's `Request` URL whose scheme is not `http` (`https://host`), or whose authority
   * is not the `Host` field's (`http://url-authority host-field`). See `keyAuthority`.
   */
  origin?: string;
}

/**
 * A request the cache will handle: its key and how long its response is kept. Made once by
 * `HttpGuard.plan` (a `Vary` variant's or a retry's is a new plan) and never written after:
 * what one run of the handler learns and changes lives in its `LeaderRun`.
 */
export interface CachePlan {
  readonly head: boolean;
  /** Path and query as received. */
  readonly url: string;
  /** The key comes from the user's `key` function. */
  readonly userKey: boolean;
  /** The key without the `Vary` part: the URL's own key, where its response or its `VaryRecord` is. */
  readonly base: string;
  readonly key: string;
  readonly ttl: number;
  /**
   * The request's own header fields (the object its handler reads): a run that leads takes the
   * client's validators off them and puts a revalidation's on (`LeaderRun`), so that the handler
   * produces the response to share.
   */
  readonly headers: IncomingHttpHeaders;
  /** The URL's `VaryRecord` this plan's key was built from (the key is then a variant's). */
  readonly record?: VaryRecord;
  /** `record` was made up for a lookup before the URL's record could be read (see varyMismatch): whoever stores under it checks the store first. */
  readonly madeUpRecord?: boolean;
  readonly retried: boolean;
  /**
   * Answered from a stored response or else by the handler alone, never leading nor storing:
   * a GET with `Range` (the handler's 206 is never stored).
   */
  readonly lookupOnly?: boolean;
  /** The tags of the request (the `tags` option), validated. */
  readonly tags?: readonly string[];
  /** The stale-serving options of this route (the adapter's, then the route's). */
  readonly freshness: FreshnessOptions;
}

/** The client's own conditional header fields, taken off the request the leader's handler sees. */
export type ClientConditional = Readonly<{ 'if-none-match'?: string; 'if-modified-since'?: string }>;

/**
 * One run of the handler for a plan (a request that leads, or a background refresh): what it
 * knows as it starts, and the fields only this cache reads, which the handler's response
 * carries and which are taken off it before it is sent. The only state of an exchange that
 * changes while it runs; the rules read it, the guard and `leaderHead` write it.
 */
export interface LeaderRun {
  readonly plan: CachePlan;
  /** The leader's own conditional headers, taken off the request its handler sees (none for a refresh no client waits for). */
  readonly conditional: ClientConditional;
  /** A stored response that needs revalidation: the handler runs with its validators. */
  readonly revalidating: ServableResponse | undefined;
  /** The stored response this run refreshes, past its freshness: served instead of the origin's failure when it allows it. */
  readonly fallback: ServableResponse | undefined;
  /** The handler's `Dogpile-Cache-Control`, once its response's header fields are final. */
  targeted: string | undefined;
  /** The handler's `Dogpile-Tags`, once its response's header fields are final. */
  tagged: string | undefined;
}

/** What an adapter does for the guard; each call happens at most once per request. */
export interface Exchange {
  /**
   * Let the framework run the route handler for this request (`X-Cache: MISS`). With a
   * `capture`, the adapter feeds it the response the handler sends: the requests waiting for
   * this one are served from it. `run` is then the run this request leads (its plan a `Vary`
   * variant's when the URL's responses vary, not the one the adapter made): the one to hand
   * back to the guard's calls about this response (`leaderHead`, `answerLeader`).
   */
  proceed(capture: ResponseCapture | undefined, run?: LeaderRun): void;
  /** Answer from the cache; the handler does not run. */
  serve(response: PreparedResponse): void;
  /** Pass an error on to the framework's error handling. */
  fail(error: unknown): void;
  /**
   * For a HEAD request: `proceed(capture)` runs the route's GET handler and captures the full
   * response it produces, while the client still gets headers only. A HEAD miss then leads or
   * joins a GET flight like a GET; without it, a HEAD miss runs the handler and stores nothing.
   */
  readonly headAsGet?: boolean;
  /**
   * Runs the route's handler for a request no client waits for (a background refresh): see
   * `Replay`. Without it, refreshes run in the foreground.
   */
  readonly replay?: Replay;
}
