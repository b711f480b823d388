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
 * Channel P:lock:{N}: a release publishes the id of the one waiter it wakes.
 */

/**
 * Lua shared by the scripts that free a lock: hands it to the first waiter whose deadline has
 * not passed (reserved as "~<waiter>" for `ms`, so nobody who was not waiting can take it
 * first) and wakes that waiter. Returns false when no live waiter is queued.
 */
const HAND_OFF = `
local function hand_off(lock, queue, channel, ms)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', queue, '-inf', now)
  local nxt = redis.call('ZRANGE', queue, 0, 0)
  if not nxt[1] then return false end
  redis.call('ZREM', queue, nxt[1])
  redis.call('SET', lock, '~' .. nxt[1], 'PX', ms)
  redis.call('PUBLISH', channel, nxt[1])
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
export const ACQUIRE = new LuaScript(
  'acquire',
  `${NEXT_FENCE}
local cur = redis.call('GET', KEYS[1])
if cur == false or (ARGV[3] ~= '' and cur == '~' .. ARGV[3]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  if ARGV[3] ~= '' then redis.call('ZREM', KEYS[3], ARGV[3]) end
  return {1, next_fence(KEYS[2])}
end
if ARGV[3] ~= '' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local bound = tonumber(ARGV[4])
  redis.call('ZADD', KEYS[3], 'NX', now + bound, ARGV[3])
  if redis.call('PTTL', KEYS[3]) < bound + 1000 then redis.call('PEXPIRE', KEYS[3], bound + 1000) end
end
return {0, redis.call('PTTL', KEYS[1])}
`,
);

/**
 * KEYS: lock, queue. ARGV: value, channel, hand-off ms.
 * Releases the lock only if it holds this value. If a live waiter is queued, the lock is
 * reserved for the first one for hand-off ms and that waiter is woken; else it is deleted.
 * Returns 1 when released, 0 when the lock was not held by this value.
 */
export const RELEASE = new LuaScript(
  'release',
  `${HAND_OFF}
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if not hand_off(KEYS[1], KEYS[2], ARGV[2], ARGV[3]) then redis.call('DEL', KEYS[1]) end
return 1
`,
);

/**
 * KEYS: queue, lock. ARGV: waiter id, channel, hand-off ms.
 * A waiter that gives up leaves the queue; if it had just been woken (it is no longer queued
 * and the lock is reserved for it, or free), the lock and the wake-up are passed on to the
 * next waiter.
 */
export const LEAVE = new LuaScript(
  'leave',
  `${HAND_OFF}
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if removed == 0 then
  local cur = redis.call('GET', KEYS[2])
  if (cur == false or cur == '~' .. ARGV[1]) and not hand_off(KEYS[2], KEYS[1], ARGV[2], ARGV[3]) and cur then
    redis.call('DEL', KEYS[2])
  end
end
return removed
`,
);

/** KEYS: lock. ARGV: value, ttl ms. Resets the expiry to ttl if held by value; 1 or 0. */
export const EXTEND = new LuaScript(
  'extend',
  `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`,
);

/**
 * KEYS: lock, queue. ARGV: channel, hand-off ms. Frees the lock whoever holds it and hands it
 * to the next live waiter. Returns 1 when there was a lock (held or reserved), else 0.
 */
export const FORCE_RELEASE = new LuaScript(
  'force-release',
  `${HAND_OFF}
local existed = redis.call('EXISTS', KEYS[1])
if not hand_off(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then redis.call('DEL', KEYS[1]) end
return existed
`,
);
