/**
 * The oracle on handler runs: every run of a guarded app's handler, live or a background
 * refresh, saw the target and header fields of a request a client actually sent for it
 * (docs/http-caching.md, "The request a response is stored for"; docs/http-refresh.md, "What a
 * background refresh runs"):
 *
 * - a live run saw one sent request: its target, and each of its header fields with the value
 *   that request gave it (a repeated field joined with ", "), except that a HEAD may run as
 *   its GET, the fields a cache answers itself (validators, `Range`) may be left out, and the
 *   stored response's validators may be added (a revalidation);
 * - a refresh saw a sent request's target (a web adapter: the same path and query, since the
 *   URL is rebuilt from the request's origin) and no field but `host` and the forwarding
 *   fields (values some request of the case sent), the fields the stored response's `Vary`
 *   names (values some request of the case sent) and the stored response's validators
 *   (`if-none-match` / `if-modified-since` with an `ETag` / `Last-Modified` the app answered
 *   in the case: Express makes its own `ETag` of a body).
 *
 * Which request a run belongs to is not known to the oracle, so it is matched against every
 * request of the case (one authority per case, so runs of other cases never match).
 */
import type { Adapter, Run } from './apps.js';

export interface SentRequest {
  method: string;
  target: string;
  /** Header fields, names lower-case, repeated ones joined with ", " (as Node hands them on). */
  headers: Record<string, string>;
}

/** The request line and header fields of raw request bytes. */
export function sentRequest(bytes: string): SentRequest {
  const head = bytes.slice(0, bytes.indexOf('\r\n\r\n')).split('\r\n');
  const [method, target] = head[0]!.split(' ') as [string, string];
  const headers: Record<string, string> = {};
  for (const line of head.slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  return { method, target, headers };
}

/** The authority of a run, lower-case and without a port (the case it belongs to). */
export function runHost(run: Run): string {
  return (run.headers.host ?? '').toLowerCase().replace(/:\d+$/, '');
}

const WEB: readonly Adapter[] = ['hono', 'fetch'];

/** Fields that only connect a request to its server (Node adds or rewrites none of them for the handler otherwise). */
const CONNECTION = new Set(['connection']);

/** A refresh may carry these, besides `host` (docs/http-refresh.md). */
const FORWARDING = ['forwarded', 'x-forwarded-host', 'x-forwarded-proto', 'x-forwarded-port', 'x-forwarded-prefix', 'x-original-url'];
const VALIDATOR_FIELDS = new Set(['if-none-match', 'if-modified-since']);

function parsed(target: string): URL | undefined {
  try {
    return /^[a-z]+:\/\//i.test(target) ? new URL(target) : new URL(`http://h${target}`);
  } catch {
    return undefined;
  }
}

function pathAndQuery(target: string): string | undefined {
  const url = parsed(target);
  return url && url.pathname + url.search;
}

/** The path of a target (origin or absolute form, or a web adapter's URL), as a URL parser reads it. */
export function pathOf(target: string): string | undefined {
  return parsed(target)?.pathname;
}

/** Whether a run's target is a sent request's (a web adapter: its URL's path and query are). */
function sameTarget(adapter: Adapter, run: Run, sent: SentRequest): boolean {
  if (!WEB.includes(adapter)) return run.target === sent.target;
  const p = pathAndQuery(sent.target);
  return p !== undefined && p === pathAndQuery(run.target);
}

/**
 * Fields of a client's request a cache answers itself (RFC 9111 §4.3.2, RFC 9110 §14.2): the
 * handler may run without them, to give the full response the cache stores.
 */
const ANSWERED_BY_CACHE = new Set(['if-none-match', 'if-modified-since', 'range', 'if-range']);

function asLive(run: Run, sent: SentRequest, validators: ReadonlySet<string>): string | undefined {
  // A HEAD shares its GET's entry: the guard may run the GET for it (RFC 9110 §9.3.2).
  if (run.method !== sent.method && !(sent.method === 'HEAD' && run.method === 'GET')) return `method ${run.method}, sent ${sent.method}`;
  for (const [name, value] of Object.entries(run.headers)) {
    if (CONNECTION.has(name) || sent.headers[name] === value) continue;
    // A revalidation of the stored response.
    if (VALIDATOR_FIELDS.has(name) && validators.has(value)) continue;
    return `${name}: ${JSON.stringify(value)}, sent ${JSON.stringify(sent.headers[name] ?? null)}`;
  }
  for (const name of Object.keys(sent.headers)) {
    if (!CONNECTION.has(name) && !ANSWERED_BY_CACHE.has(name) && run.headers[name] === undefined) return `no ${name}, sent ${JSON.stringify(sent.headers[name])}`;
  }
  return undefined;
}

function asRefresh(run: Run, all: readonly SentRequest[], vary: readonly string[], validators: ReadonlySet<string>): string | undefined {
  if (run.method !== 'GET') return `a ${run.method}`;
  for (const [name, value] of Object.entries(run.headers)) {
    if (VALIDATOR_FIELDS.has(name)) {
      if (!validators.has(value)) return `${name}: ${JSON.stringify(value)}, a validator of no reply`;
      continue;
    }
    if (name !== 'host' && !FORWARDING.includes(name) && !vary.includes(name)) return `${name}: ${JSON.stringify(value)}, a field a refresh does not carry`;
    if (!all.some((s) => s.headers[name] === value)) return `${name}: ${JSON.stringify(value)}, sent by no request`;
  }
  if (run.headers.host === undefined) return 'no host';
  return undefined;
}

/** Why a run matches no sent request of its case (live or as a refresh), or undefined when it matches one. */
export function unmatchedRun(adapter: Adapter, run: Run, sent: readonly SentRequest[], vary: readonly string[], validators: ReadonlySet<string>): string | undefined {
  const targets = sent.filter((s) => sameTarget(adapter, run, s));
  if (targets.length === 0) return `target ${JSON.stringify(run.target)} was sent by no request (sent: ${JSON.stringify([...new Set(sent.map((s) => s.target))])})`;
  const live = targets.map((s) => asLive(run, s, validators));
  if (live.some((why) => why === undefined)) return undefined;
  const refresh = asRefresh(run, sent, vary, validators);
  if (refresh === undefined) return undefined;
  return `not a sent request (${live[0]}) nor a refresh of one (${refresh})`;
}
