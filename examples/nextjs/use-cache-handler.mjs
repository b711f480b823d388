import { createUseCacheHandler } from 'dogpile-guard/next';

export default createUseCacheHandler({ redis: process.env.REDIS_URL });
