import { LuaScript } from '../redis/lua-script.js';

/*
 * Keys of one cache key K (see store/key.ts): P:v:{K} value, P:l:{K} lead lock, P:s:{K} a value
 * shared but not stored; channel P:c:{K}.
 * Messages on the channel (first byte): 'v' + entry (value stored, inline), 's' + entry (value
 * shared with the waiters but not stored), 'V' (value stored, too big to inline: read it),
 * 'S' (value shared, too big to inline: read it from P:s:{K}, which lives a lock TTL),
 * 'e' + JSON error, 'u' (not cacheable), 'r' (lead released, no outcome), and, for the copies
 * other processes keep (L1): 'V' is followed by the new entry's created-at (8 bytes, float64 BE)
 * and 'd' + the time of a delete (the same 8 bytes) tells the key was deleted.
 * Tags: P:t:{tag} holds `hard:stale`, the times (ms since the epoch) the tag was last
 * invalidated; channel P:tc:{tag} carries 't' + that text after each invalidation.
 */

/**
 * KEYS: value, lock. ARGV: token, lock ttl ms, skip value ('1' to ignore a stored value; '<' +
 * ms since the epoch: ignore it only when it was created at or before then, i.e. it is still
 * the value the caller found invalidated),
 * now (ms since the epoch), try lead on a stale value ('1' | '0').
 * Returns {1, value} | {2} (lead: the lock is ours) | {3, remaining ms of the leader's lock
 * [, 1 when the lock had no expiry and was given lockTtl]}
 * | {4, error} (the value key holds another Redis type: a foreign value, looked past with skip)
 * | {5, value, 1} (a version 2 or 3 entry past its expiry, and the lead is ours: refresh it)
 * | {5, value, 0, remaining ms of the lock or -2 when there is none, 1 when the lock is a
 *   failSafeRetry hold ('F:' + token, kept after a failed refresh: no one is loading)}.
 * The expiry of a version 2 or 3 entry is the float64 at bytes 12..19 (store/entry.ts).
 */
/** What LOOKUP answers (bulk strings as Buffers: it is run with `runBuffer`). */
export type LookupReply = [1, Buffer] | [2] | [3, number, 1?] | [4, Buffer] | [5, Buffer, 1] | [5, Buffer, 0, number, 0 | 1];

export const LOOKUP = new LuaScript<[token: string, lockTtl: number, skipValue: string, now: number, tryLead: '0' | '1'], LookupReply>(
  'lookup',
  `
local value_key = KEYS[1]
local lock_key = KEYS[2]
local token = ARGV[1]
local lock_ttl = ARGV[2]
local skip_value = ARGV[3]
if skip_value ~= '1' then
  local v = redis.pcall('GET', value_key)
  if type(v) == 'table' and v.err then return {4, v.err} end
  if v and string.sub(skip_value, 1, 1) == '<' and #v >= 12 and string.byte(v, 1) == 208 and string.byte(v, 2) == 103
    and struct.unpack('>d', string.sub(v, 5, 12)) <= tonumber(string.sub(skip_value, 2)) then
    -- The value the caller found invalidated (created at or before that time): looked past.
    v = false
  end
  if v then
    if #v >= 36 and string.byte(v, 1) == 208 and string.byte(v, 2) == 103 and (string.byte(v, 3) == 2 or string.byte(v, 3) == 3)
      and tonumber(ARGV[4]) >= struct.unpack('>d', string.sub(v, 13, 20)) then
      if ARGV[5] == '1' and redis.call('SET', lock_key, token, 'NX', 'PX', lock_ttl) then return {5, v, 1} end
      local holder = redis.call('GET', lock_key)
      return {5, v, 0, redis.call('PTTL', lock_key), (holder and string.sub(holder, 1, 2) == 'F:') and 1 or 0}
    end
    return {1, v}
  end
end
if redis.call('SET', lock_key, token, 'NX', 'PX', lock_ttl) then return {2} end
local left = redis.call('PTTL', lock_key)
if left == -1 then
  -- A lock never lives without an expiry: another program wrote it, or it was PERSISTed.
  -- Give it one, so a live leader's renewals keep it and a dead one's lock runs out.
  redis.call('PEXPIRE', lock_key, lock_ttl)
  return {3, tonumber(lock_ttl), 1}
end
return {3, left}
`,
);

/**
 * KEYS: value, lock, shared. ARGV: token, mode, bytes, ttl ms, channel, inline max bytes,
 * shared ttl ms, publish command ('SPUBLISH' on a cluster with sharded pub/sub, else 'PUBLISH').
 * mode: 'store' (write + announce), 'share' (announce; a value too big to inline is left
 * under the shared key for the shared ttl, for the waiters to read once), 'uncacheable' (optional marker),
 * 'error' (announce the error), 'release' (announce nothing but the release), 'fail' (announce
 * the error, but keep the lock for ttl ms more instead of releasing it: failSafeRetry).
 * Writes only while the lock still holds this token, so a leader that lost its lock never
 * overwrites a newer leader's value. Returns 1, or 0 when the lock was lost.
 */
export const COMMIT = new LuaScript<
  [token: string, mode: string, bytes: Buffer, ttl: number, channel: string, inlineMax: number, sharedTtl: number, publish: string],
  0 | 1
>(
  'commit',
  `
local value_key = KEYS[1]
local lock_key = KEYS[2]
local shared_key = KEYS[3]
local token = ARGV[1]
local mode = ARGV[2]
local bytes = ARGV[3]
local ttl = ARGV[4]
local channel = ARGV[5]
local inline_max = tonumber(ARGV[6])
local shared_ttl = ARGV[7]
local pub = ARGV[8] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
if redis.call('GET', lock_key) ~= token then return 0 end
if mode == 'fail' then
  redis.call('SET', lock_key, 'F:' .. token, 'PX', ttl)
  redis.call('PUBLISH', channel, 'e' .. bytes)
  return 1
end
redis.call('DEL', lock_key)
if mode == 'store' or mode == 'share' then
  if mode == 'store' then redis.call('SET', value_key, bytes, 'PX', ttl) end
  if #bytes <= inline_max then
    redis.call(pub, channel, (mode == 'store' and 'v' or 's') .. bytes)
  elseif mode == 'store' then
    redis.call(pub, channel, 'V' .. string.sub(bytes, 5, 12))
  else
    redis.call('SET', shared_key, bytes, 'PX', shared_ttl)
    redis.call(pub, channel, 'S')
  end
elseif mode == 'uncacheable' then
  if #bytes > 0 and tonumber(ttl) > 0 then redis.call('SET', value_key, bytes, 'PX', ttl) end
  redis.call(pub, channel, 'u')
elseif mode == 'error' then
  redis.call(pub, channel, 'e' .. bytes)
else
  redis.call(pub, channel, 'r')
end
return 1
`,
);

/**
 * KEYS: value. ARGV: bytes, ttl ms, channel, inline max bytes, publish command.
 * Stores an entry written with `set()` and announces it like a leader's store ('v' + entry, or
 * 'V' + its created-at when too big to inline), so waiters take it and other processes' copies follow.
 */
export const SET_ANNOUNCE = new LuaScript<[bytes: Buffer, ttl: number, channel: string, inlineMax: number, publish: string], 'OK'>(
  'set-announce',
  `
local bytes = ARGV[1]
local pub = ARGV[5] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
redis.call('SET', KEYS[1], bytes, 'PX', ARGV[2])
if #bytes <= tonumber(ARGV[4]) then
  redis.call(pub, ARGV[3], 'v' .. bytes)
else
  redis.call(pub, ARGV[3], 'V' .. string.sub(bytes, 5, 12))
end
return 'OK'
`,
);

/**
 * KEYS: value. ARGV: channel, the time of the delete (8 bytes, float64 BE), publish command.
 * Deletes the entry and announces 'd' + the time, so other processes drop their copies.
 * Returns the number of keys deleted.
 */
export const DELETE_ANNOUNCE = new LuaScript<[channel: string, at: Buffer, publish: string], number>(
  'delete-announce',
  `
local n = redis.call('DEL', KEYS[1])
redis.call(ARGV[3] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', ARGV[1], 'd' .. ARGV[2])
return n
`,
);

/**
 * KEYS: tag stamp. ARGV: at (ms since the epoch, an integer), '1' for a stale invalidation,
 * keep ms, channel, publish command. Moves the tag's hard or stale stamp forward to `at` (never
 * back), keeps the stamp for at least `keep` ms, and announces 't' + `hard:stale`.
 */
export const TAG_INVALIDATE = new LuaScript<[at: number, stale: '0' | '1', keep: number, channel: string, publish: string], string>(
  'tag-invalidate',
  `
local hard, stale = 0, 0
local cur = redis.call('GET', KEYS[1])
if cur then
  local colon = string.find(cur, ':', 1, true)
  if colon then
    hard = tonumber(string.sub(cur, 1, colon - 1)) or 0
    stale = tonumber(string.sub(cur, colon + 1)) or 0
  end
end
local at = tonumber(ARGV[1])
if ARGV[2] == '1' then
  if at > stale then stale = at end
elseif at > hard then
  hard = at
end
local text = string.format('%.0f:%.0f', hard, stale)
local keep = tonumber(ARGV[3])
local left = redis.call('PTTL', KEYS[1])
if left > keep then keep = left end
redis.call('SET', KEYS[1], text, 'PX', keep)
redis.call(ARGV[5] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', ARGV[4], 't' .. text)
return text
`,
);
