import { LuaScript } from '../redis/lua-script.js';

/*
 * Keys of one lock named N (prefix P); they share the hash tag {N}, so one cluster slot:
 *   P:lock:{N}        the lock: "<token>|<owner id>", with a PX expiry; or, for a short while
 *                     after a release that woke waiter W, "~W": reserved for W, so that a caller
 *                     that was not waiting cannot take the lock before the waiter it was handed to
 *   P:lock:{N}:fence  the fencing counter (INCR on every acquisition, never expires); when it
 *                     is missing (first use, a restart without persistence, eviction) it is
 *                     seeded with the server's clock in microseconds, so tokens never go back
 *   P:lock:{N}:q      waiters: a sorted set of waiter ids scored by their deadline in ms on the
 *                     server's clock (TIME): the one clock every process shares; a waiter
 *                     sends how long it will still wait, never a timestamp of its own
 * Channel P:lock:{N}: a release publishes the id of the one waiter it wakes (SPUBLISH on a
 * cluster with sharded pub/sub, else PUBLISH: the last ARGV of the scripts that publish).
 */

/**
 * Lua shared by the scripts that free a lock: hands it to the first waiter whose deadline has
 * not passed (reserved as "~<waiter>" for `ms`, so nobody who was not waiting can take it
 * first) and wakes that waiter. Returns false when no live waiter is queued.
 */
const HAND_OFF = `
local function hand_off(lock, queue, channel, ms, pub)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', queue, '-inf', now)
  local nxt = redis.call('ZRANGE', queue, 0, 0)
  if not nxt[1] then return false end
  redis.call('ZREM', queue, nxt[1])
  redis.call('SET', lock, '~' .. nxt[1], 'PX', ms)
  redis.call(pub == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', channel, nxt[1])
  return true
end
`;

/**
 * Lua: the next fencing token. A missing counter starts at the server's TIME in microseconds
 * (seconds and zero-padded microseconds joined as digits: exact, no float formatting); so
 * after the counter is lost, the next token is larger than every earlier one as long as the
 * server's clock did not go back and fewer tokens were issued than microseconds went by since
 * the counter was seeded. About 1.8e15 today: exact in a JavaScript number until 2255.
 */
const NEXT_FENCE = `
local function next_fence(fence)
  if redis.call('EXISTS', fence) == 0 then
    local t = redis.call('TIME')
    redis.call('SET', fence, t[1] .. string.format('%06d', tonumber(t[2])))
  end
  return redis.call('INCR', fence)
end
`;

/**
 * KEYS: lock, fence, queue. ARGV: value, ttl ms, waiter id ('' = do not queue), how long the
 * waiter will wait at most (ms; its queue entry lapses then, measured on the server's clock).
 * Takes the lock when it is free or reserved for this waiter.
 * Returns {1, fencing token} when acquired; {0, remaining ms of the current holder} when not.
 */
export const ACQUIRE = new LuaScript<[value: string, ttl: number, waiterId: string, waitMs: number], [0 | 1, number]>(
  'acquire',
  `${NEXT_FENCE}
local lock_key = KEYS[1]
local fence_key = KEYS[2]
local queue_key = KEYS[3]
local value = ARGV[1]
local ttl = ARGV[2]
local waiter = ARGV[3]
local bound = tonumber(ARGV[4])
local cur = redis.call('GET', lock_key)
if cur == false or (waiter ~= '' and cur == '~' .. waiter) then
  redis.call('SET', lock_key, value, 'PX', ttl)
  if waiter ~= '' then redis.call('ZREM', queue_key, waiter) end
  return {1, next_fence(fence_key)}
end
if waiter ~= '' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', queue_key, 'NX', now + bound, waiter)
  if redis.call('PTTL', queue_key) < bound + 1000 then redis.call('PEXPIRE', queue_key, bound + 1000) end
end
return {0, redis.call('PTTL', lock_key)}
`,
);

/**
 * KEYS: lock, queue. ARGV: value, channel, hand-off ms, publish command.
 * Releases the lock only if it holds this value. If a live waiter is queued, the lock is
 * reserved for the first one for hand-off ms and that waiter is woken; else it is deleted.
 * Returns 1 when released, 0 when the lock was not held by this value.
 */
export const RELEASE = new LuaScript<[value: string, channel: string, handoffMs: number, publish: string], 0 | 1>(
  'release',
  `${HAND_OFF}
local lock_key = KEYS[1]
local queue_key = KEYS[2]
local value = ARGV[1]
local channel = ARGV[2]
local handoff_ms = ARGV[3]
local pub = ARGV[4]
if redis.call('GET', lock_key) ~= value then return 0 end
if not hand_off(lock_key, queue_key, channel, handoff_ms, pub) then redis.call('DEL', lock_key) end
return 1
`,
);

/**
 * KEYS: queue, lock. ARGV: waiter id, channel, hand-off ms, publish command.
 * A waiter that gives up leaves the queue; if it had just been woken (it is no longer queued
 * and the lock is reserved for it, or free), the lock and the wake-up are passed on to the
 * next waiter.
 */
export const LEAVE = new LuaScript<[waiterId: string, channel: string, handoffMs: number, publish: string], 0 | 1>(
  'leave',
  `${HAND_OFF}
local queue_key = KEYS[1]
local lock_key = KEYS[2]
local waiter = ARGV[1]
local channel = ARGV[2]
local handoff_ms = ARGV[3]
local pub = ARGV[4]
local removed = redis.call('ZREM', queue_key, waiter)
if removed == 0 then
  local cur = redis.call('GET', lock_key)
  if (cur == false or cur == '~' .. waiter) and not hand_off(lock_key, queue_key, channel, handoff_ms, pub) and cur then
    redis.call('DEL', lock_key)
  end
end
return removed
`,
);

/**
 * KEYS: lock, queue. ARGV: channel, hand-off ms, publish command. Frees the lock whoever holds it and hands it
 * to the next live waiter. Returns 1 when there was a lock (held or reserved), else 0.
 */
export const FORCE_RELEASE = new LuaScript<[channel: string, handoffMs: number, publish: string], 0 | 1>(
  'force-release',
  `${HAND_OFF}
local lock_key = KEYS[1]
local queue_key = KEYS[2]
local channel = ARGV[1]
local handoff_ms = ARGV[2]
local pub = ARGV[3]
local existed = redis.call('EXISTS', lock_key)
if not hand_off(lock_key, queue_key, channel, handoff_ms, pub) then redis.call('DEL', lock_key) end
return existed
`,
);
