import type { LoaderContext } from '../../core/cache.js';
import { revalidationHeaders } from '../rules/conditional.js';
import type { ResponseCapture, SharedResponse } from './capture.js';
import type { CachePlan, ClientConditional, Exchange, LeaderRun } from './plan-types.js';
import type { ServableResponse } from './serve.js';

/** The loader that makes a request the leader, and whether it ran for that request (`leaderLoader`). */
export interface Lead {
  loader(ctx: LoaderContext, fallback?: ServableResponse): Promise<Buffer | null>;
  ran: boolean;
}

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
 * The request fields of the leader's request that its handler must not see: the client's own
 * validators are taken off (the handler produces the full response for everyone; its client
 * still gets the answer to them, `leaderNotModified`), and a revalidation's are put on
 * (`revalidating`: the stored response's). Edits `headers`, the request's own; returns the
 * client's validators.
 */
function leaderRequestHeaders(headers: CachePlan['headers'], revalidating: ServableResponse | undefined): ClientConditional {
  const conditional: { 'if-none-match'?: string; 'if-modified-since'?: string } = {};
  for (const name of ['if-none-match', 'if-modified-since'] as const) {
    if (headers[name] !== undefined) conditional[name] = headers[name];
    delete headers[name];
  }
  if (revalidating !== undefined) Object.assign(headers, revalidationHeaders(revalidating.headerObject));
  return conditional;
}

/**
 * The loader that makes this request the leader: its handler runs (`exchange.proceed`) with the
 * capture `capture` starts for the `LeaderRun`, and the loader resolves with the verdict on what
 * it captured. The handler must produce the full response for the others, not a 304 for this
 * client's copy, so this client's conditional headers are taken off the request (its own client
 * still gets the answer to them: leaderNotModified); a revalidation of `revalidating` puts its
 * validators on. The loader's `fallback` is the stored response the run refreshes. `ran` tells
 * whether the loader ran here.
 */
export function leaderLoader(plan: CachePlan, exchange: Exchange, capture: (run: LeaderRun) => ResponseCapture, revalidating?: ServableResponse): Lead {
  const lead: Lead = {
    ran: false,
    loader: (ctx, fallback) => {
      lead.ran = true;
      const conditional = leaderRequestHeaders(plan.headers, revalidating);
      const run: LeaderRun = { plan, conditional, revalidating, fallback, targeted: undefined, tagged: undefined };
      const started = capture(run);
      try {
        exchange.proceed(started, run);
      } catch (error) {
        started.share(null);
        exchange.fail(error);
      }
      return started.promise.then((shared) => verdict(ctx, shared));
    },
  };
  return lead;
}
