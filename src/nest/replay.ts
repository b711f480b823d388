import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { CacheDecision } from '../core/cache.js';
import { expressReplay, injectTarget, type ExpressLikeApp } from '../http/exchange/node-replay.js';
import type { Replay, ReplayRequest } from '../http/pipeline.js';

/**
 * The field that marks a request injected for a background refresh: a token known only to the
 * interceptor that sent it, one per refresh, taken off the request when the interceptor sees it.
 */
const REPLAY_FIELD = 'dogpile-replay';

/** What the handler produced for a background refresh. */
export type ReplayOutcome = { value: unknown; decision: CacheDecision | undefined } | { error: unknown };

/** The part of a Fastify instance a refresh uses: its request listener, once the app is ready. */
type FastifyLike = { ready(): PromiseLike<unknown>; routing(req: IncomingMessage, res: ServerResponse): void };

/** Background refreshes of one interceptor: the route runs through the whole app (guards, pipes, interceptors) on either platform. */
export class NestReplays {
  private readonly pending = new Map<string, (outcome: ReplayOutcome) => void>();
  private express: Replay | undefined;

  /** @param instance The platform's app: an Express app, or a Fastify instance. */
  constructor(private readonly instance: () => unknown) {}

  /**
   * Runs the route for `request` and resolves with what its handler produced, or undefined when
   * something in front of it (a guard, a middleware) answered instead.
   */
  async run(request: ReplayRequest): Promise<ReplayOutcome | undefined> {
    const token = randomUUID();
    let outcome: ReplayOutcome | undefined;
    this.pending.set(token, (o) => {
      outcome = o;
    });
    try {
      const headers = { ...request.headers, [REPLAY_FIELD]: token };
      const app = this.instance();
      if (typeof app === 'function') {
        this.express ??= expressReplay(app as ExpressLikeApp);
        await this.express({ ...request, headers });
      } else {
        const fastify = app as FastifyLike;
        await fastify.ready();
        await injectTarget((req, res) => fastify.routing(req, res), { ...request, headers });
      }
    } finally {
      this.pending.delete(token);
    }
    return outcome;
  }

  /** The sink of a request that is one of these refreshes (the marking field is taken off it), else undefined. */
  take(headers: IncomingHttpHeaders): ((outcome: ReplayOutcome) => void) | undefined {
    const token = headers[REPLAY_FIELD];
    if (token === undefined) return undefined;
    delete headers[REPLAY_FIELD];
    return typeof token === 'string' ? this.pending.get(token) : undefined;
  }
}
