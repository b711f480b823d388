import { createCacheHandler } from 'dogpile-guard/next';

export default createCacheHandler({ redis: process.env.REDIS_URL });
