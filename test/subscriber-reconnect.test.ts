/**
 * The shared subscriber connection after a reconnect: it subscribes its channels again itself,
 * and a resubscription that fails (the server refuses it, or the connection drops again first)
 * is handled, never an unhandled rejection that would end the process; the channels come back
 * once the server confirms them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createCache } from '../src/index.js';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { waitUntil } from '../tools/basics.js';

let own: RedisServer | undefined;
afterEach(async () => {
  await own?.stop();
  own = undefined;
});

describe('the shared subscriber after a reconnect', () => {
  it('handles a refused resubscription (no unhandled rejection) and subscribes again once the server allows it', async () => {
    own = await startRedis();
    const server = own;
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    // From a URL: the client the library makes (maxRetriesPerRequest 1), as an application's.
    const cache = createCache({ redis: server.url, prefix: 'resub' });
    try {
      // Another process holds the key's lead: this call waits on the key's channel.
      await server.command('SET', 'resub:l:{k}', 'someone else', 'PX', 60_000);
      const waiting = cache.getOrCompute('k', () => 'loaded here', { ttl: 10_000, waitTimeout: 8000, onWaitTimeout: 'load' });
      const subscribers = async () => Number(((await server.command('PUBSUB', 'NUMSUB', 'resub:c:{k}')) as [string, number])[1]);
      await waitUntil('the wait subscribed', async () => (await subscribers()) === 1);
      // The server refuses SUBSCRIBE from now on; the subscriber connection is dropped and reconnects.
      await server.command('ACL', 'SETUSER', 'default', '-subscribe');
      await server.command('ACL', 'LOG', 'RESET');
      await server.command('CLIENT', 'KILL', 'TYPE', 'pubsub');
      const refusedSubscribe = async () => ((await server.command('ACL', 'LOG')) as unknown[][]).some((entry) => entry.map(String).includes('subscribe'));
      await waitUntil('a resubscription refused', refusedSubscribe);
      // A rejection nobody handles is reported at the end of this turn at the latest.
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(unhandled).toEqual([]);
      // Allowed again: the channel comes back (a retry a second later); the wait goes on to its bound.
      await server.command('ACL', 'SETUSER', 'default', '+subscribe');
      await waitUntil('the channel subscribed again', async () => (await subscribers()) === 1);
      expect(await waiting).toBe('loaded here');
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await cache.close();
    }
  }, 60_000);
});
