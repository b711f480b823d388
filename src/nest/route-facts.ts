import { fixedHeaderRules } from '../http/flow/value-answer.js';
import { NEST_HEADERS_METADATA, NEST_PARAM_NEXT, NEST_PARAM_RESPONSE, NEST_ROUTE_ARGS_METADATA, NEST_SSE_METADATA } from './constants.js';

/** What the interceptor needs to know about a handler, read once from Nest's metadata. */
interface HandlerFacts {
  /**
   * Why the handler's requests are let through untouched, or undefined:
   * - `@Res()` / `@Next()`: the handler writes the response itself (status, headers, cookies,
   *   body, or with `passthrough: true` some of them), so its return value is not the whole
   *   response and cannot stand in for it on other requests;
   * - `@Sse()`: a stream of events, not one value.
   */
  skip: string | undefined;
  /** The handler's `@Header()` decorators, applied by Nest to every response of the route. */
  headers: readonly { name: string; value: string | (() => string) }[];
}

type Fn = (...args: any[]) => unknown;
const memo = new WeakMap<object, WeakMap<Fn, HandlerFacts>>();

const getMetadata = (key: string, target: object, property?: string | symbol): unknown => {
  const reflect = Reflect as unknown as { getMetadata?: (k: string, t: object, p?: string | symbol) => unknown };
  return reflect.getMetadata?.(key, target, property);
};

/** Facts about `handler` of controller `cls` (memoised per class and handler). */
export function handlerFacts(cls: object, handler: Fn): HandlerFacts {
  let perClass = memo.get(cls);
  if (!perClass) {
    perClass = new WeakMap();
    memo.set(cls, perClass);
  }
  let facts = perClass.get(handler);
  if (!facts) {
    facts = readFacts(cls, handler);
    perClass.set(handler, facts);
  }
  return facts;
}

function readFacts(cls: object, handler: Fn): HandlerFacts {
  const headers = (getMetadata(NEST_HEADERS_METADATA, handler) as HandlerFacts['headers'] | undefined) ?? [];
  return { skip: skipReason(cls, handler), headers };
}

function skipReason(cls: object, handler: Fn): string | undefined {
  // Nest keys route parameters `${paramtype}:${index}` on the controller class, per method name.
  const args = getMetadata(NEST_ROUTE_ARGS_METADATA, cls, handler.name) as Record<string, unknown> | undefined;
  for (const key of Object.keys(args ?? {})) {
    const type = Number(key.split(':', 1)[0]);
    if (type === NEST_PARAM_RESPONSE) return '@Res()';
    if (type === NEST_PARAM_NEXT) return '@Next()';
  }
  if (getMetadata(NEST_SSE_METADATA, handler) === true) return '@Sse()';
  return undefined;
}

/**
 * The shared rules for stored responses applied to the route's `@Header()` values: a route
 * that sends `Set-Cookie`, `Cache-Control: private | no-store | no-cache` or `Vary: *` is not
 * cached; the request headers a `Vary` names become part of the key. (The status is not a
 * question here: in Nest it comes from the route's `@HttpCode()`, the same for every request.)
 */
export function headerRules(facts: HandlerFacts): { notStorable: string | undefined; vary: string[] } {
  return fixedHeaderRules(facts.headers.map(({ name, value }) => [name, typeof value === 'function' ? value() : value] as const));
}
