/**
 * Fleet scenario: a RedisLock taken over and over on a shared Redis or Redis Cluster, with a
 * check of mutual exclusion. A call acquires the lock, INCRs a counter in the lock's hash slot
 * (which must answer 1: nobody else is inside), waits `holdMs`, DECRs it and releases; its
 * record carries `n`, the INCR's answer. Run it in `lanes` (each lane a contender).
 *
 * Config: `url` (or `cluster`: startup nodes), `name`, `holdMs` (default 2), `ttl` (default
 * 10 s), `timeout` (acquire's, default 30 s).
 */
import { Cluster, Redis } from 'ioredis';
import { RedisLock } from '../../../src/index.js';
import { sleep } from '../../basics.js';
import { runMember } from '../member.js';

interface Config {
  url: string;
  cluster?: { host: string; port: number }[];
  name: string;
  holdMs?: number;
  ttl?: number;
  timeout?: number;
}

runMember<Config>({
  async start(config) {
    const redis = config.cluster ? new Cluster(config.cluster) : new Redis(config.url);
    redis.on('error', () => {});
    const counter = `{${config.name}}:counter`;
    const locks = new Map<number, RedisLock>();
    await redis.ping();
    return {
      async call({ lane }) {
        let lock = locks.get(lane);
        if (!lock) locks.set(lane, (lock = new RedisLock(redis, config.name, { ttl: config.ttl ?? 10_000 })));
        await lock.acquire({ timeout: config.timeout ?? 30_000 });
        try {
          const n = await redis.incr(counter);
          await sleep(config.holdMs ?? 2);
          await redis.decr(counter);
          return { n };
        } finally {
          await lock.release();
        }
      },
      async close() {
        redis.disconnect();
      },
    };
  },
});
