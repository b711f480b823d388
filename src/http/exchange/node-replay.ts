import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HandlerResponse, Replay, ReplayRequest } from '../pipeline.js';
import { runSyntheticExchange, type NodeListener } from './synthetic-exchange.js';
import { HttpGuard } from '../flow/guard.js';

export type { NodeListener } from './synthetic-exchange.js';


/** The request-handling surface of an Express app (a `node:http` request listener with Express's prototypes). */
export interface ExpressLikeApp {
  (req: IncomingMessage, res: ServerResponse): void;
  request: object;
  response: object;
  handle(req: IncomingMessage, res: ServerResponse, callback?: (error?: unknown) => void): void;
  parent?: ExpressLikeApp;
}

/**
 * True for a request every guard lets through: one injected for a background refresh (claimed
 * before the app sees it, `expressReplay`), or one a guard has already claimed.
 */
export function isReplay(req: object): boolean {
  return HttpGuard.claimed(req);
}

/**
 * Runs `listener` for `request` on a synthetic request and response (`runSyntheticExchange`):
 * the app sees `req.url` exactly as the stored target, byte for byte, and exactly the header
 * fields in `headers` (an `undefined` value is not sent); the response is read whole.
 */
export function injectTarget(listener: NodeListener, request: ReplayRequest, headers: Readonly<Record<string, string | undefined>> = request.headers): Promise<HandlerResponse> {
  return runSyntheticExchange(listener, { method: request.method, url: request.url, headers });
}

/**
 * Runs a request through an Express app (from the top: every middleware, router and error
 * handler in front of the route) on a synthetic request and response (`injectTarget`). The app
 * sees exactly the replayed headers, marked as a refresh; its response is read whole.
 */
export function expressReplay(app: ExpressLikeApp): Replay {
  let root = app;
  while (root.parent !== undefined) root = root.parent;
  const top = root;
  return async (request) => {
    const dispatch = (req: IncomingMessage, res: ServerResponse) => {
      HttpGuard.claim(req);
      top.handle(req, res);
    };
    return injectTarget(dispatch, request);
  };
}
