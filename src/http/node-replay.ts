import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HandlerResponse, Replay, ReplayRequest } from './pipeline.js';

/** Set on a request injected for a background refresh: every guard in the app lets it through. */
const REPLAYED = Symbol.for('dogpile-guard.replayed');

/** The request-handling surface of an Express app (a `node:http` request listener with Express's prototypes). */
export interface ExpressLikeApp {
  (req: IncomingMessage, res: ServerResponse): void;
  request: object;
  response: object;
  handle(req: IncomingMessage, res: ServerResponse, callback?: (error?: unknown) => void): void;
  parent?: ExpressLikeApp;
}

/** True for a request injected for a background refresh. */
export function isReplay(req: object): boolean {
  return (req as { [REPLAYED]?: boolean })[REPLAYED] === true;
}

/**
 * Own copies of the methods of `source`'s prototype on a new object inheriting from `base`: the
 * injected request (response) keeps the injector's behaviour when the app gives it its own
 * prototype, while the app's shared prototypes stay untouched.
 */
function mixedPrototype(base: object, source: object): object {
  const proto = Object.create(base) as object;
  const own = Object.getPrototypeOf(source) as object;
  for (const name of Object.getOwnPropertyNames(own)) {
    if (name === 'constructor') continue;
    Object.defineProperty(proto, name, Object.getOwnPropertyDescriptor(own, name)!);
  }
  return proto;
}

/** A `node:http` request listener (an app's, or a dispatch of the adapter's own). */
export type NodeListener = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Runs `listener` for `request` with a synthetic request and response (`light-my-request`)
 * whose target is exactly the stored one: the injector parses the URL it is given (dot
 * segments resolved, a leading `//` read as an authority, characters percent-encoded), so it
 * gets `/` and the request's `url` is set to the stored target, byte for byte, before the app
 * sees it. `headers` are the fields sent (`user-agent: undefined` keeps the injector's own off);
 * the response is read whole.
 */
export async function injectTarget(listener: NodeListener, request: ReplayRequest, headers: Readonly<Record<string, string | undefined>> = request.headers): Promise<HandlerResponse> {
  // Loaded with the first refresh: an app that never serves stale never loads it.
  const { default: inject } = await import('light-my-request');
  const target = request.url;
  const dispatch = (req: IncomingMessage, res: ServerResponse) => {
    req.url = target;
    listener(req, res);
  };
  const res = await inject(dispatch, { method: 'GET', url: '/', headers: { 'user-agent': undefined, ...headers } });
  return { status: res.statusCode, headers: res.headers as Record<string, string | string[] | number | undefined>, body: [res.rawPayload] };
}

/**
 * Runs a request through an Express app (from the top: every middleware, router and error
 * handler in front of the route) with a synthetic request and response (`light-my-request`).
 * The app sees exactly the replayed headers, marked as a refresh; its response is read whole.
 */
export function expressReplay(app: ExpressLikeApp): Replay {
  let root = app;
  while (root.parent !== undefined) root = root.parent;
  const top = root;
  return async (request) => {
    const dispatch = (req: IncomingMessage, res: ServerResponse) => {
      (req as unknown as { [REPLAYED]: boolean })[REPLAYED] = true;
      for (const name of Object.keys(req.headers)) if (!(name in request.headers)) delete req.headers[name];
      // The app's own view, so that its prototypes for this request keep the injector's methods.
      const view = Object.create(top, {
        request: { value: mixedPrototype(top.request, req) },
        response: { value: mixedPrototype(top.response, res) },
      }) as ExpressLikeApp;
      top.handle.call(view, req, res);
    };
    return injectTarget(dispatch, request);
  };
}
