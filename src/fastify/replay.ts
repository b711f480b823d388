import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Replay } from '../http/pipeline.js';
import { injectTarget } from '../http/exchange/node-replay.js';

/**
 * The field that marks a request injected for a background refresh: its value is a token only
 * this plugin knows, one per refresh. It is taken off the request in the plugin's first
 * `onRequest` hook, with every field the refresh did not send, before any route hook or
 * handler sees it.
 */
const REPLAY_FIELD = 'dogpile-replay';

/** Background refreshes of one plugin instance: the app's own listener runs the route for them (`injectTarget`). */
interface Replayer {
  readonly replay: Replay;
  /** Called first for every request: true (and the request cleaned) for a refresh of this plugin. */
  admit(raw: IncomingMessage): boolean;
  has(raw: IncomingMessage): boolean;
}

export function replayer(fastify: FastifyInstance): Replayer {
  /** Token → the header names the refresh sent. */
  const pending = new Map<string, ReadonlySet<string>>();
  const admitted = new WeakSet<IncomingMessage>();
  return {
    async replay(request) {
      const token = randomUUID();
      pending.set(token, new Set(Object.keys(request.headers)));
      try {
        await fastify.ready();
        // `fastify.routing` is the app's request listener (what `inject()` runs), here with the stored target.
        return await injectTarget((req, res) => fastify.routing(req, res), request, { ...request.headers, [REPLAY_FIELD]: token });
      } finally {
        pending.delete(token);
      }
    },
    admit(raw) {
      const token = raw.headers[REPLAY_FIELD];
      if (token === undefined) return false;
      const sent = typeof token === 'string' ? pending.get(token) : undefined;
      // A client sending the field gets it removed, and is a client like any other.
      if (sent === undefined) {
        delete raw.headers[REPLAY_FIELD];
        return false;
      }
      for (const name of Object.keys(raw.headers)) if (!sent.has(name)) delete raw.headers[name];
      const rawHeaders: string[] = [];
      for (let i = 0; i + 1 < raw.rawHeaders.length; i += 2) if (sent.has(raw.rawHeaders[i]!.toLowerCase())) rawHeaders.push(raw.rawHeaders[i]!, raw.rawHeaders[i + 1]!);
      raw.rawHeaders.splice(0, raw.rawHeaders.length, ...rawHeaders);
      admitted.add(raw);
      return true;
    },
    has(raw) {
      return admitted.has(raw);
    },
  };
}
