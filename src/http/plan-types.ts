import type { IncomingHttpHeaders } from 'node:http';
import type { FreshnessOptions } from '../core/freshness.js';
import type { ResponseCapture } from './capture.js';
import type { Replay } from './pipeline.js';
import type { PreparedResponse, ServableResponse } from './serve.js';
import type { VaryRecord } from './vary-record.js';

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

/** A request the cache will handle: its key and how long its response is kept. */
export interface CachePlan {
  head: boolean;
  /** Path and query as received. */
  url: string;
  /** The key comes from the user's `key` function. */
  userKey: boolean;
  /** The key without the `Vary` part: the URL's own key, where its response or its `VaryRecord` is. */
  base: string;
  key: string;
  ttl: number;
  headers: IncomingHttpHeaders;
  /** The URL's `VaryRecord` this plan's key was built from (the key is then a variant's). */
  record?: VaryRecord;
  /** `record` was made up for a lookup before the URL's record could be read (see varyMismatch): whoever stores under it checks the store first. */
  madeUpRecord?: boolean;
  retried: boolean;
  /**
   * Answered from a stored response or else by the handler alone, never leading nor storing:
   * a GET with `Range` (the handler's 206 is never stored).
   */
  lookupOnly?: boolean;
  /** A stored response that needs revalidation: the handler runs with its validators. */
  revalidating?: ServableResponse;
  /** The stored response this run refreshes, past its freshness: served instead of the origin's failure when it allows it. */
  fallback?: ServableResponse;
  /** The leader's own conditional headers, taken off the request its handler sees. */
  conditional?: { 'if-none-match'?: string; 'if-modified-since'?: string };
  /** The leader's `Dogpile-Cache-Control`, taken off its response before it was sent. */
  targeted?: string;
  /** The tags of the request (the `tags` option), validated. */
  tags?: readonly string[];
  /** The leader's `Dogpile-Tags`, taken off its response before it was sent. */
  tagged?: string;
  /** The stale-serving options of this route (the adapter's, then the route's). */
  freshness: FreshnessOptions;
}

/** What an adapter does for the guard; each call happens at most once per request. */
export interface Exchange {
  /**
   * Let the framework run the route handler for this request (`X-Cache: MISS`). With a
   * `capture`, the adapter feeds it the response the handler sends: the requests waiting for
   * this one are served from it. `plan` is then the plan this run leads (a `Vary` variant's
   * when the URL's responses vary, not the one the adapter made): the one to hand back to the
   * guard's calls about this response.
   */
  proceed(capture: ResponseCapture | undefined, plan?: CachePlan): void;
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
