import type { CacheStatusEntry } from './cache-status.js';
import { evaluateConditional, mergeNotModified, notModifiedHeaders } from './conditional.js';
import type { CapturedResponse } from '../flow/capture.js';
import { formatHttpDate } from './http-date.js';
import { renewal, storableFreshness, type StoreRules } from './response-store.js';
import type { LeaderRun } from '../flow/plan-types.js';

/*
 * What the guard decides about a leader's response as its adapter sends it: its `Cache-Status`,
 * a 304 to the client's own conditional request, the stored response renewed by a 304. Pure
 * functions of the run and the response's status and header fields.
 */

/**
 * The `Cache-Status` entry of the leader's response, whose header fields are about to be sent
 * (this cache's own `Dogpile-*` fields already taken off into the run). It says `stored` only
 * when the response is what the capture will store: storable by its headers as they are now, a
 * body within `maxBodySize` (`bodySize`, else its `Content-Length`), and, for a 304 to a
 * revalidation, one that selects and renews the stored response. `captured`: the adapter can
 * capture this response at all. What cannot be known yet can still keep it out of the store:
 * headers added after this point (another middleware's `writeHead` hook, such as a session
 * cookie), a body without a length that grows past `maxBodySize`, a stream that breaks, a store
 * that cannot be reached.
 */
export function leaderStatus(
  run: LeaderRun,
  status: number,
  headers: CapturedResponse['headers'],
  rules: StoreRules,
  now: number,
  captured: boolean,
  bodySize?: number,
): CacheStatusEntry {
  if (!captured) return { fwd: 'miss' };
  if (run.revalidating !== undefined && status === 304) {
    const renewed = renewal(run, run.revalidating, headers, rules, now);
    return renewed === undefined ? { fwd: 'stale', fwdStatus: 304 } : { fwd: 'stale', fwdStatus: 304, stored: true };
  }
  const f = storableFreshness(run, status, headers, rules, now, bodySize);
  const fwd = run.revalidating !== undefined ? 'stale' : 'miss';
  return f !== undefined ? { fwd, stored: true, ttl: f.ttl } : { fwd };
}

/**
 * True when the leader's client sent a conditional request that the full response its
 * handler produced satisfies: that client gets a 304 (RFC 9110 §13.2.2), the others and
 * the store the full response.
 */
export function leaderNotModified(run: LeaderRun, status: number, headers: CapturedResponse['headers']): boolean {
  const { conditional } = run;
  if (Object.keys(conditional).length === 0) return false;
  return evaluateConditional(conditional, headers, { method: 'GET', status }) === '304';
}

/**
 * The handler answered a revalidation with a 304 that selects the stored response (RFC 9111
 * §4.3.4): what its client gets instead, the stored response with its headers renewed (a `Date`
 * of `now`), or a 304 when that answers the client's own conditional request.
 */
export function revalidated304(
  run: LeaderRun,
  status: number,
  headers: CapturedResponse['headers'],
  now: number,
): { status: number; headers: Record<string, string | string[]>; body: Buffer } | undefined {
  const stored = run.revalidating;
  if (stored === undefined || status !== 304) return undefined;
  const merged = mergeNotModified(stored.headerObject, headers);
  if (merged === undefined) return undefined;
  merged.date = formatHttpDate(now);
  delete merged['dogpile-cache-control'];
  delete merged['content-length'];
  // The client's own conditional request, answered from the renewed response.
  const { conditional } = run;
  if (Object.keys(conditional).length > 0 && evaluateConditional(conditional, merged, { method: 'GET', status: stored.status }) === '304') {
    return { status: 304, headers: notModifiedHeaders(merged), body: Buffer.alloc(0) };
  }
  merged['content-length'] = String(stored.body.length);
  return { status: stored.status, headers: merged, body: stored.body };
}
