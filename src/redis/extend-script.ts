import { LuaScript } from './lua-script.js';

/**
 * KEYS: lock. ARGV: value, ttl ms. Resets the lock's expiry to ttl while it holds value;
 * returns 1, or 0 when it does not (expired, or taken by someone else). Renews both a
 * `RedisLock` and a cache leader's lead lock.
 */
export const EXTEND = new LuaScript<[value: string, ttl: number], 0 | 1>(
  'extend',
  `
local lock_key = KEYS[1]
local value = ARGV[1]
local ttl = ARGV[2]
if redis.call('GET', lock_key) == value then
  return redis.call('PEXPIRE', lock_key, ttl)
end
return 0
`,
);
