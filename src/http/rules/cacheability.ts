import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { isValidHost, requestHost, UNKEYED_INPUT_HEADERS } from './cache-key.js';
import { selectCacheDirectives } from './cache-control.js';
import { headerValue, parseVary } from './headers.js';

/**
 * Why a request is passed through without touching the cache, or undefined when it may be
 * served from it. Follows what shared caches do (Varnish's builtin `vcl_recv`, RFC 9111):
 * only GET and HEAD; a `Host` that is not a valid `host[:port]` (a forged one, such as
 * `victim.example/admin`, that the app may still build links or routes from); a GET or HEAD carrying a body (`Content-Length` over 0
 * or any `Transfer-Encoding`: the app may read it, and the key does not include it); any of
 * `privateHeaders` (credentials: pass `[]` when the key includes the identity); range
 * requests (a 206 answers one range only).
 */
export function requestBypassReason(method: string, headers: IncomingHttpHeaders, privateHeaders: readonly string[]): string | undefined {
  if (method !== 'GET' && method !== 'HEAD') return 'method';
  if (!isValidHost(requestHost(headers))) return 'host';
  if (hasBody(headers)) return 'body';
  for (const name of privateHeaders) if (headers[name] !== undefined) return name;
  if (headers.range !== undefined) return 'range';
  return undefined;
}

/** `RequestScan` bits: a field that may make `requestBypassReason` pass the request; one of `UNKEYED_INPUT_HEADERS`. */
export const MAY_BYPASS = 1;
export const UNKEYED_INPUT = 2;

/**
 * What a request's header fields may mean for the cache, in one pass over the fields it
 * carries (one map lookup each) rather than one lookup per name asked about: `MAY_BYPASS`
 * when it carries a body field, `Range` or one of `privateHeaders` (`requestBypassReason`
 * then says which applies), `UNKEYED_INPUT` when it carries a forwarding field that puts it
 * under a key of its own (`hasUnkeyedInput`). 0 for most requests.
 */
export type RequestScan = (headers: IncomingHttpHeaders) => number;

export function requestScanner(privateHeaders: readonly string[]): RequestScan {
  const roles = new Map<string, number>();
  for (const name of ['transfer-encoding', 'content-length', 'range', ...privateHeaders]) roles.set(name, MAY_BYPASS);
  for (const name of UNKEYED_INPUT_HEADERS) roles.set(name, (roles.get(name) ?? 0) | UNKEYED_INPUT);
  return (headers) => {
    let found = 0;
    for (const name in headers) {
      const role = roles.get(name);
      if (role !== undefined && headers[name] !== undefined) found |= role;
    }
    return found;
  };
}

/** Does the request announce a body? (`Content-Length: 0` does not; a `Transfer-Encoding` always does.) */
function hasBody(headers: IncomingHttpHeaders): boolean {
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = headers['content-length'];
  return length !== undefined && Number(length) !== 0;
}

interface ResponseFacts {
  status: number;
  headers: OutgoingHttpHeaders;
  /** The body went over `maxBodySize`. */
  tooBig: boolean;
}

/**
 * Why a response must not be stored (nor handed to other requests), or undefined when it may
 * be: a status outside the allowed list, `Set-Cookie`, `private | no-store | no-cache` in the
 * field that governs this cache (`Dogpile-Cache-Control`, else `CDN-Cache-Control`, else
 * `Cache-Control`: RFC 9213), `Vary: *`, or a body over the size limit. (The HTTP adapters
 * decide with `responseFreshness`, which also reads the response's lifetime.)
 */
export function responseNotStorableReason(facts: ResponseFacts, statuses: ReadonlySet<number>): string | undefined {
  if (!statuses.has(facts.status)) return `status ${facts.status}`;
  if (facts.headers['set-cookie'] !== undefined) return 'set-cookie';
  const { directives: cc, source } = selectCacheDirectives(facts.headers);
  if (cc.has('private')) return `${source}: private`;
  if (cc.has('no-store')) return `${source}: no-store`;
  if (cc.has('no-cache')) return `${source}: no-cache`;
  if (parseVary(headerValue(facts.headers, 'vary')) === '*') return 'vary: *';
  if (facts.tooBig) return 'body over maxBodySize';
  return undefined;
}
