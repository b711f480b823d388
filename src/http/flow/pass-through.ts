import type { OutgoingHttpHeaders } from 'node:http';
import { requestHost, userCacheKey } from '../rules/cache-key.js';
import { defaultKeyInvalidation, invalidationTargets } from '../rules/invalidation.js';
import type { CapturedResponse } from './capture.js';
import type { HttpRequestInfo } from './plan-types.js';
import { keyAuthority } from './request-plan.js';

/** What the pipeline does for a request it does not answer from the cache: `HttpGuard.passing`. */
export interface PassThrough {
  /** Header fields to set on the handler's response. */
  readonly headers: ReadonlyArray<readonly [name: string, value: string]>;
  /**
   * Called once the handler's status and header fields are final (`headers` reads them, only
   * when needed); a promise to wait for before the response is sent, or undefined.
   */
  afterHandler(status: number, headers: () => OutgoingHttpHeaders): Promise<void> | undefined;
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

/**
 * The stored GET responses a successful unsafe request invalidates (RFC 9111 §4.4), handed to
 * `invalidate`: those of its own URL and of its `Location` / `Content-Location` on the same host
 * (every `Vary` variant), whatever forwarding headers the write carried
 * (`defaultKeyInvalidation`). With a `key` function (`keyFn`), the key of its own URL is what
 * that function returns for `req` seen as a GET (`method` reads 'GET'; URL, headers and
 * everything else are the request's own, so a key that includes the identity finds that
 * client's entry); the `Location` / `Content-Location` URLs are then left alone, since no
 * request for them exists to ask the function about. Never rejects.
 */
export async function invalidateAfterWrite<Req>(
  info: HttpRequestInfo,
  status: number,
  responseHeaders: CapturedResponse['headers'],
  keyFn: ((req: Req) => unknown) | undefined,
  req: Req | undefined,
  invalidate: (keys: readonly string[], tags: readonly string[]) => Promise<void>,
): Promise<void> {
  const targets = invalidationTargets(info.method, status, info.url, requestHost(info.headers), responseHeaders);
  if (targets.length === 0) return;
  if (keyFn === undefined) {
    const { keys, tags } = defaultKeyInvalidation(targets, info.headers, keyAuthority(info));
    return invalidate(keys, tags);
  }
  if (req === undefined) return;
  let k: unknown;
  try {
    k = keyFn(readAsGet(req));
  } catch {
    // A key function that cannot answer for the GET view has nothing to invalidate.
    return;
  }
  return invalidate(typeof k === 'string' && k !== '' ? [userCacheKey(k)] : [], []);
}
