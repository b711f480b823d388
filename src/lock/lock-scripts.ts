import { LuaScript } from '../redis/lua-script.js';

/*
 * Keys of one lock named N (prefix P); they share the hash tag {N}, so one cluster slot:
 *   P:lock:{N}        the lock: "<token>|<owner id>", with a PX expiry. A release that finds a
 *                     live waiter sets it to that waiter's value at once: the waiter holds it
 *                     from then on, so nobody who was not waiting can take it in between.
 *                     ("~W", a reservation for the waiter W, is what an earlier version of
 *                     these scripts left instead; it is still honoured.)
 *   P:lock:{N}:fence  the fencing counter (INCR on every acquisition, never expires); when it
 *                     is missing (first use, a restart without persistence, eviction) it is
 *                     seeded with the server's clock in microseconds, so tokens never go back
 *   P:lock:{N}:q      waiters: a sorted set of "<ttl ms>@<subscriber id>|<lock value>" scored
 *                     by the waiter's deadline in ms on the server's clock (TIME): the one clock
 *                     every process shares; a waiter sends how long it will still wait, never a
 *                     timestamp. (Entries of earlier versions have no "@<subscriber id>".)
 * Channel P:lock:{N}:w:<subscriber id>: a release that hands the lock over publishes
 * "<id> <fencing token>" there, to the new holder, id being the part of its lock value before
 * the "|": only the process of that waiter's subscriber connection is woken. (SPUBLISH on a
 * cluster with sharded pub/sub, else PUBLISH: the last ARGV of the scripts that publish.)
 * Channel P:lock:{N}: the same message for a waiter of an earlier version, which listens there.
 */

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
 * Lua shared by the scripts that free a lock: hands it to the first waiter whose deadline has
 * not passed. The lock is set to that waiter's value with that waiter's TTL, the fencing
 * counter advances, and the token is published to the waiter (on its subscriber's channel of
 * the lock), which holds the lock from then on without another round trip. A waiter that went away meanwhile (it leaves the queue when
 * it gives up, but a killed process cannot) holds it until its TTL runs out, like a holder
 * that died. Not a shorter "claim" for the waiter to confirm: the confirmation would be the
 * round trip this saves, and the waiter cannot tell how late its wake-up arrived, so a claim
 * shorter than the TTL could run out while it believes it holds the lock.
 * Returns false when no live waiter is queued.
 */
const HAND_OFF = `${NEXT_FENCE}
local function hand_off(lock, fence, queue, channel, pub)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', queue, '-inf', now)
  local nxt = redis.call('ZRANGE', queue, 0, 0)
  if not nxt[1] then return false end
  redis.call('ZREM', queue, nxt[1])
  local publish = pub == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
  local target = channel
  local ms, sid, value = string.match(nxt[1], '^(%d+)@([^|]+)|(.+)$')
  if ms then
    target = channel .. ':w:' .. sid
  else
    ms, value = string.match(nxt[1], '^(%d+)|(.+)$')
  end
  if ms then
    redis.call('SET', lock, value, 'PX', ms)
    -- '%.0f': Lua's own number-to-string conversion keeps 14 digits; tokens have 16
    redis.call(publish, target, string.match(value, '^[^|]*') .. ' ' .. string.format('%.0f', next_fence(fence)))
  else
    -- a waiter of an earlier version: reserve the lock for it and wake it
    redis.call('SET', lock, '~' .. nxt[1], 'PX', 1000)
    redis.call(publish, channel, nxt[1])
  end
  return true
end
`;

/**
 * KEYS: lock, fence, queue. ARGV: value, ttl ms, queue entry ("<ttl>|<value>"; '' = do not
 * queue), how long the waiter will wait at most (ms; its queue entry lapses then, measured on
 * the server's clock).
 * Takes the lock when it is free. A waiter also finds it already handed to it (the lock holds
 * its value: the wake-up was lost or has not arrived yet); then the TTL starts again and the
 * token is the one the hand-off drew (the counter's current value).
 * Returns {1, fencing token} when acquired; {0, remaining ms of the current holder} when not.
 */
export const ACQUIRE = new LuaScript<[value: string, ttl: number, entry: string, waitMs: number], [0 | 1, number]>(
  'acquire',
  `${NEXT_FENCE}
local lock_key = KEYS[1]
local fence_key = KEYS[2]
local queue_key = KEYS[3]
local value = ARGV[1]
local ttl = ARGV[2]
local entry = ARGV[3]
local bound = tonumber(ARGV[4])
local cur = redis.call('GET', lock_key)
if cur == value then
  redis.call('PEXPIRE', lock_key, ttl)
  redis.call('ZREM', queue_key, entry)
  local token = tonumber(redis.call('GET', fence_key))
  return {1, token or next_fence(fence_key)}
end
if cur == false or (entry ~= '' and cur == '~' .. entry) then
  redis.call('SET', lock_key, value, 'PX', ttl)
  if entry ~= '' then redis.call('ZREM', queue_key, entry) end
  return {1, next_fence(fence_key)}
end
if entry ~= '' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', queue_key, 'NX', now + bound, entry)
  if redis.call('PTTL', queue_key) < bound + 1000 then redis.call('PEXPIRE', queue_key, bound + 1000) end
end
return {0, redis.call('PTTL', lock_key)}
`,
);

/**
 * KEYS: lock, queue, fence. ARGV: value, channel, publish command.
 * Releases the lock only if it holds this value: hands it to the first live waiter, or
 * deletes it when none is queued.
 * Returns 1 when released, 0 when the lock was not held by this value.
 */
export const RELEASE = new LuaScript<[value: string, channel: string, publish: string], 0 | 1>(
  'release',
  `${HAND_OFF}
local lock_key = KEYS[1]
local queue_key = KEYS[2]
local fence_key = KEYS[3]
local value = ARGV[1]
local channel = ARGV[2]
local pub = ARGV[3]
if redis.call('GET', lock_key) ~= value then return 0 end
if not hand_off(lock_key, fence_key, queue_key, channel, pub) then redis.call('DEL', lock_key) end
return 1
`,
);

/**
 * KEYS: queue, lock, fence. ARGV: queue entry, value, channel, publish command.
 * A waiter that gives up leaves the queue. If it was no longer queued and the lock had been
 * handed to it meanwhile (the lock holds its value, or an earlier version's reservation for
 * it), or is free, the lock is passed on to the next live waiter (or deleted).
 * Returns 1 when the entry was still queued, else 0.
 */
export const LEAVE = new LuaScript<[entry: string, value: string, channel: string, publish: string], 0 | 1>(
  'leave',
  `${HAND_OFF}
local queue_key = KEYS[1]
local lock_key = KEYS[2]
local fence_key = KEYS[3]
local entry = ARGV[1]
local value = ARGV[2]
local channel = ARGV[3]
local pub = ARGV[4]
local removed = redis.call('ZREM', queue_key, entry)
if removed == 0 then
  local cur = redis.call('GET', lock_key)
  if (cur == false or cur == value or cur == '~' .. entry) and not hand_off(lock_key, fence_key, queue_key, channel, pub) and cur then
    redis.call('DEL', lock_key)
  end
end
return removed
`,
);

/**
 * KEYS: lock, queue, fence. ARGV: channel, publish command. Frees the lock whoever holds it
 * and hands it to the next live waiter. Returns 1 when there was a lock, else 0.
 */
export const FORCE_RELEASE = new LuaScript<[channel: string, publish: string], 0 | 1>(
  'force-release',
  `${HAND_OFF}
local lock_key = KEYS[1]
local queue_key = KEYS[2]
local fence_key = KEYS[3]
local channel = ARGV[1]
local pub = ARGV[2]
local existed = redis.call('EXISTS', lock_key)
if not hand_off(lock_key, fence_key, queue_key, channel, pub) then redis.call('DEL', lock_key) end
return existed
`,
);
