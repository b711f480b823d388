// @fortedigital/nextjs-cache-handler as its README's quick start sets it up: the redis-strings
// handler on a node-redis client, connected once when Next loads the file. Named by
// bench/nextjs.bench.ts as examples/nextjs's cacheHandler (NEXT_OTHER_CACHE_HANDLER).
import { CacheHandler } from '@fortedigital/nextjs-cache-handler';
import createRedisHandler from '@fortedigital/nextjs-cache-handler/redis-strings';
import { createClient } from 'redis';

const client = createClient({ url: process.env.REDIS_URL });
client.on('error', (error) => console.error(`redis: ${error.message}`));
await client.connect();

CacheHandler.onCreation(() => ({ handlers: [createRedisHandler({ client, keyPrefix: 'fortedigital:' })] }));

export default CacheHandler;
