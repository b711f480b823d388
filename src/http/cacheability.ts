import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { cacheControlDirectives, headerValue, parseVary } from './headers.js';

/**
 * Why a request is passed through without touching the cache, or undefined when it may be
 * served from it. Follows what shared caches do (Varnish's builtin `vcl_recv`, RFC 9111):
 * only GET and HEAD; nothing that carries credentials unless the key includes the identity;
 * range requests go to the app (a 206 answers one range only).
 */
export function requestBypassReason(method: string, headers: IncomingHttpHeaders, keyIncludesIdentity: boolean): string | undefined {
  if (method !== 'GET' && method !== 'HEAD') return 'method';
  if (!keyIncludesIdentity) {
    if (headers.authorization !== undefined) return 'authorization';
    if (headers.cookie !== undefined) return 'cookie';
  }
  if (headers.range !== undefined) return 'range';
  return undefined;
}

export interface ResponseFacts {
  status: number;
  headers: OutgoingHttpHeaders;
  /** The body went over `maxBodySize`. */
  tooBig: boolean;
}

/**
 * Why a response must not be stored (nor handed to other requests), or undefined when it may
 * be: a status outside the allowed list, `Set-Cookie`, `Cache-Control: private | no-store |
 * no-cache`, `Vary: *`, or a body over the size limit.
 */
export function responseNotStorableReason(facts: ResponseFacts, statuses: ReadonlySet<number>): string | undefined {
  if (!statuses.has(facts.status)) return `status ${facts.status}`;
  if (facts.headers['set-cookie'] !== undefined) return 'set-cookie';
  const cc = cacheControlDirectives(headerValue(facts.headers, 'cache-control'));
  if (cc.has('private')) return 'cache-control: private';
  if (cc.has('no-store')) return 'cache-control: no-store';
  if (cc.has('no-cache')) return 'cache-control: no-cache';
  if (parseVary(headerValue(facts.headers, 'vary')) === '*') return 'vary: *';
  if (facts.tooBig) return 'body over maxBodySize';
  return undefined;
}
