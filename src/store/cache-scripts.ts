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
 * Lua shared by the scripts that write an entry or a delete: the server's clock, never a
 * process's. `server_now(value_key)` is the server's time in ms (fractional: microseconds),
 * and always later than the created-at of the entry the key holds, so every write and delete
 * of one key is stamped strictly after the one before, whatever the clocks. `stamp(bytes, now,
 * started)` rewrites an encoded entry's header (store/entry.ts) to be created at `now`: its
 * expiry and stale end move with it, and Δ becomes at least `now - started` (the run began no
 * later than `started`, on the server's clock), so a value whose run began before a tag's
 * invalidation counts as older.
 */
const STAMP_LUA = `
local function server_now(value_key)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
  local head = redis.pcall('GETRANGE', value_key, 0, 11)
  if type(head) == 'string' and #head == 12 and string.byte(head, 1) == 208 and string.byte(head, 2) == 103 then
    local created = struct.unpack('>d', string.sub(head, 5, 12))
    if created >= now then now = created + 0.001 end
  end
  return now
end
local function stamp(bytes, now, started)
  if #bytes < 20 or string.byte(bytes, 1) ~= 208 or string.byte(bytes, 2) ~= 103 then return bytes, 0 end
  if string.byte(bytes, 3) == 1 then return string.sub(bytes, 1, 4) .. struct.pack('>d', now) .. string.sub(bytes, 13), 0 end
  if #bytes < 36 then return bytes, 0 end
  local shift = now - struct.unpack('>d', string.sub(bytes, 5, 12))
  local expires = struct.unpack('>d', string.sub(bytes, 13, 20)) + shift
  local stale_until = struct.unpack('>d', string.sub(bytes, 21, 28)) + shift
  local delta = struct.unpack('>d', string.sub(bytes, 29, 36))
  if started and now - started > delta then delta = now - started end
  return string.sub(bytes, 1, 4) .. struct.pack('>dddd', now, expires, stale_until, delta) .. string.sub(bytes, 37), delta
end
`;

/**
 * KEYS: value, lock. ARGV: token, lock ttl ms, skip value ('1' to ignore a stored value; '<' +
 * ms since the epoch: ignore it only when it was created at or before then, i.e. it is still
 * the value the caller found invalidated),
 * expired ('1': answer a version 2, 3 or 4 entry as past its expiry whatever the time; '0': by
 * the server's clock), try lead on a stale value ('1' | '0'), not after (ms since the epoch on
 * the server's clock, as text; '' for none: past it the caller has given up (commandTimeout),
 * so no lock is taken for it — a lock nobody holds would make every other caller wait it out),
 * clock ('1': the caller has no reading of the server's clock yet; every reply then carries one).
 * Every reply starts with its kind and the server's time (ms since the epoch, as text with its
 * microseconds: the moment a lead was taken, and a reading of the server's clock), or '' for a
 * *wait* while the caller has a reading: a waiting caller's look-up costs two commands in the
 * script (`GET` of the value, `PTTL` of the lock), not `TIME` and a `SET NX` bound to fail — the
 * waiters of a stampede look up twice each (before and after they subscribe):
 * {1, t, value} | {2, t} (lead: the lock is ours) | {3, t, remaining ms of the leader's lock
 * [, 1 when the lock had no expiry and was given lockTtl]}
 * | {4, t, error} (the value key holds another Redis type: a foreign value, looked past with skip)
 * | {5, t, value, 1} (a version 2, 3 or 4 entry past its expiry, and the lead is ours: refresh it)
 * | {5, t, value, 0, remaining ms of the lock or -2 when there is none, 1 when the lock is a
 *   failSafeRetry hold ('F:' + token, kept after a failed refresh: no one is loading)}.
 * The expiry of a version 2, 3 or 4 entry is the float64 at bytes 12..19 (store/entry.ts).
 */
/** What LOOKUP answers (bulk strings as Buffers: it is run with `runBuffer`). */
export type LookupReply =
  | [1, Buffer, Buffer]
  | [2, Buffer]
  | [3, Buffer, number, 1?]
  | [4, Buffer, Buffer]
  | [5, Buffer, Buffer, 1]
  | [5, Buffer, Buffer, 0, number, 0 | 1];

export const LOOKUP = new LuaScript<[token: string, lockTtl: number, skipValue: string, expired: '0' | '1', tryLead: '0' | '1', notAfter: string, clock: '0' | '1'], LookupReply>(
  'lookup',
  `
local value_key = KEYS[1]
local lock_key = KEYS[2]
local token = ARGV[1]
local lock_ttl = ARGV[2]
local skip_value = ARGV[3]
local not_after = ARGV[6]
local now = 0
local time = ''
-- The server's clock, read once, and only by a reply that needs it.
local function clock()
  if time == '' then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
    time = string.format('%.3f', now)
  end
  return now
end
if ARGV[7] == '1' then clock() end
local function lead()
  if not_after ~= nil and not_after ~= '' and clock() > tonumber(not_after) then return false end
  clock()
  return redis.call('SET', lock_key, token, 'NX', 'PX', lock_ttl)
end
if skip_value ~= '1' then
  local v = redis.pcall('GET', value_key)
  if type(v) == 'table' and v.err then clock() return {4, time, v.err} end
  -- Judged past its expiry as of the server's time, or whatever the time with expired.
  local at = 0
  if v then
    at = clock()
    if ARGV[4] == '1' then at = 8.64e15 end
  end
  if v and string.sub(skip_value, 1, 1) == '<' and #v >= 12 and string.byte(v, 1) == 208 and string.byte(v, 2) == 103
    and struct.unpack('>d', string.sub(v, 5, 12)) <= tonumber(string.sub(skip_value, 2)) then
    -- The value the caller found invalidated (created at or before that time): looked past.
    v = false
  end
  if v then
    if #v >= 36 and string.byte(v, 1) == 208 and string.byte(v, 2) == 103 and string.byte(v, 3) >= 2 and string.byte(v, 3) <= 4
      and at >= struct.unpack('>d', string.sub(v, 13, 20)) then
      if ARGV[5] == '1' and lead() then return {5, time, v, 1} end
      local holder = redis.call('GET', lock_key)
      return {5, time, v, 0, redis.call('PTTL', lock_key), (holder and string.sub(holder, 1, 2) == 'F:') and 1 or 0}
    end
    return {1, time, v}
  end
end
-- No value: a live lock is waited for (no clock, no SET NX that must fail); none is taken.
local left = redis.call('PTTL', lock_key)
if left == -2 then
  if lead() then return {2, time} end
  -- Not taken: the caller gave up (not after), and no one holds the lock.
  return {3, time, -2}
end
if left == -1 then
  -- A lock never lives without an expiry: another program wrote it, or it was PERSISTed.
  -- Give it one, so a live leader's renewals keep it and a dead one's lock runs out.
  redis.call('PEXPIRE', lock_key, lock_ttl)
  return {3, time, tonumber(lock_ttl), 1}
end
return {3, time, left}
`,
);

/**
 * KEYS: value, lock, shared. ARGV: token, mode, bytes, ttl ms, channel, inline max bytes,
 * shared ttl ms, publish command ('SPUBLISH' on a cluster with sharded pub/sub, else 'PUBLISH'),
 * started (when the lead was taken, on the server's clock; '' when unknown).
 * mode: 'store' (write + announce), 'share' (announce; a value too big to inline is left
 * under the shared key for the shared ttl, for the waiters to read once), 'uncacheable' (optional marker),
 * 'error' (announce the error), 'release' (announce nothing but the release), 'fail' (announce
 * the error, but keep the lock for ttl ms more instead of releasing it: failSafeRetry).
 * Writes only while the lock still holds this token, so a leader that lost its lock never
 * overwrites a newer leader's value. A value or marker is stamped with the server's time
 * (STAMP_LUA). Returns {1, created at, Δ} (as text; '0' for modes that write no entry), or 0
 * when the lock was lost.
 */
export const COMMIT = new LuaScript<
  [token: string, mode: string, bytes: Buffer, ttl: number, channel: string, inlineMax: number, sharedTtl: number, publish: string, started: string],
  0 | [1, string, string]
>(
  'commit',
  `${STAMP_LUA}
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
  redis.call(pub, channel, 'e' .. bytes)
  return {1, '0', '0'}
end
redis.call('DEL', lock_key)
local now, delta = 0, 0
if #bytes > 0 and (mode == 'store' or mode == 'share' or mode == 'uncacheable') then
  now = server_now(value_key)
  bytes, delta = stamp(bytes, now, tonumber(ARGV[9]))
end
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
return {1, string.format('%.3f', now), string.format('%.3f', delta)}
`,
);

/**
 * KEYS: value, lock. ARGV: bytes, ttl ms, channel, inline max bytes, publish command, started (on the
 * server's clock; '' when unknown), not after (the server's time after which the write is
 * refused: its caller has given up on it; '' for none), write ('1': the application's own
 * write, which supersedes running leads; '0': a value a loader computed).
 * Stores an entry written with `set()`, stamped with the server's time (STAMP_LUA), and
 * announces it like a leader's store ('v' + entry, or 'V' + its created-at when too big to
 * inline), so waiters take it and other processes' copies follow. For a write, the key's lead
 * lock is dropped: a loader that was running began before it, and its commit is refused (its
 * older value never lands over this one). Returns {created at, Δ} as text, or 0 when it came
 * after its caller gave up (nothing written).
 */
export const SET_ANNOUNCE = new LuaScript<
  [bytes: Buffer, ttl: number, channel: string, inlineMax: number, publish: string, started: string, notAfter: string, write: '0' | '1'],
  0 | [string, string]
>(
  'set-announce',
  `${STAMP_LUA}
local pub = ARGV[5] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
local now = server_now(KEYS[1])
if ARGV[7] ~= '' and now > tonumber(ARGV[7]) then return 0 end
local bytes, delta = stamp(ARGV[1], now, tonumber(ARGV[6]))
redis.call('SET', KEYS[1], bytes, 'PX', ARGV[2])
if ARGV[8] == '1' then redis.call('DEL', KEYS[2]) end
if #bytes <= tonumber(ARGV[4]) then
  redis.call(pub, ARGV[3], 'v' .. bytes)
else
  redis.call(pub, ARGV[3], 'V' .. string.sub(bytes, 5, 12))
end
return {string.format('%.3f', now), string.format('%.3f', delta)}
`,
);

/**
 * KEYS: value, lock. ARGV: channel, publish command, not after (as SET_ANNOUNCE's).
 * Deletes the entry and its lead lock (a running loader's commit is then refused) and announces 'd' + the time of the delete on the server's clock (8 bytes,
 * float64 BE; later than the created-at of the entry it deletes), so other processes drop
 * their copies. Returns {number of keys deleted, the time as text}, or 0 when it came after
 * its caller gave up (nothing deleted).
 */
export const DELETE_ANNOUNCE = new LuaScript<[channel: string, publish: string, notAfter: string], 0 | [number, string]>(
  'delete-announce',
  `${STAMP_LUA}
local now = server_now(KEYS[1])
if ARGV[3] ~= '' and now > tonumber(ARGV[3]) then return 0 end
local n = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
redis.call(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', ARGV[1], 'd' .. struct.pack('>d', now))
return {n, string.format('%.3f', now)}
`,
);

/**
 * KEYS: tag stamp. ARGV: at (the time of the invalidation, ms since the epoch on the server's
 * clock; '' for the server's time now), '1' for a stale invalidation, keep ms, channel, publish
 * command. Moves the tag's hard or stale stamp forward to `at` (never back), keeps the stamp for
 * at least `keep` ms, and announces 't' + `hard:stale`. Returns {`hard:stale`, at} as text.
 */
export const TAG_INVALIDATE = new LuaScript<[at: string, stale: '0' | '1', keep: number, channel: string, publish: string], [string, string]>(
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
if not at then
  local t = redis.call('TIME')
  at = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
if ARGV[2] == '1' then
  if at > stale then stale = at end
elseif at > hard then
  hard = at
end
local text = string.format('%.3f:%.3f', hard, stale)
local keep = tonumber(ARGV[3])
local left = redis.call('PTTL', KEYS[1])
if left > keep then keep = left end
redis.call('SET', KEYS[1], text, 'PX', keep)
redis.call(ARGV[5] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', ARGV[4], 't' .. text)
return {text, string.format('%.3f', at)}
`,
);

/**
 * KEYS: lock. ARGV: token, lock ttl ms, not after (as LOOKUP's). Takes the key's lead lock if it
 * is free and its caller has not given up; returns 1 when taken, else 0.
 */
export const TRY_LEAD = new LuaScript<[token: string, lockTtl: number, notAfter: string], 0 | 1>(
  'try-lead',
  `
if ARGV[3] ~= '' then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000 > tonumber(ARGV[3]) then return 0 end
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
`,
);
