import { LuaScript } from '../redis/lua-script.js';

/*
 * Keys of one cache key K (see store/key.ts): P:v:{K} value, P:l:{K} lead lock, P:s:{K} a value
 * shared but not stored; channel P:c:{K}.
 * Messages on the channel (first byte): 'v' + entry (value stored, inline), 's' + entry (value
 * shared with the waiters but not stored), 'V' (value stored, too big to inline: read it),
 * 'S' (value shared, too big to inline: read it from P:s:{K}, which lives a lock TTL),
 * 'e' + JSON error, 'u' (not cacheable), 'r' (lead released, no outcome).
 */

/**
 * KEYS: value, lock. ARGV: token, lock ttl ms, skip value ('1' to ignore a stored value).
 * Returns {1, value} | {2} (lead: the lock is ours) | {3, remaining ms of the leader's lock
 * [, 1 when the lock had no expiry and was given lockTtl]}
 * | {4, error} (the value key holds another Redis type: a foreign value, looked past with skip).
 */
export const LOOKUP = new LuaScript(
  'lookup',
  `
if ARGV[3] ~= '1' then
  local v = redis.pcall('GET', KEYS[1])
  if type(v) == 'table' and v.err then return {4, v.err} end
  if v then return {1, v} end
end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2} end
local left = redis.call('PTTL', KEYS[2])
if left == -1 then
  -- A lock never lives without an expiry: another program wrote it, or it was PERSISTed.
  -- Give it one, so a live leader's renewals keep it and a dead one's lock runs out.
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return {3, tonumber(ARGV[2]), 1}
end
return {3, left}
`,
);

/**
 * KEYS: value, lock, shared. ARGV: token, mode, bytes, ttl ms, channel, inline max bytes,
 * shared ttl ms.
 * mode: 'store' (write + announce), 'share' (announce; a value too big to inline is left
 * under the shared key for the shared ttl, for the waiters to read once), 'uncacheable' (optional marker),
 * 'error' (announce the error), 'release' (announce nothing but the release).
 * Writes only while the lock still holds this token, so a leader that lost its lock never
 * overwrites a newer leader's value. Returns 1, or 0 when the lock was lost.
 */
export const COMMIT = new LuaScript(
  'commit',
  `
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2])
local mode = ARGV[2]
local bytes = ARGV[3]
if mode == 'store' or mode == 'share' then
  if mode == 'store' then redis.call('SET', KEYS[1], bytes, 'PX', ARGV[4]) end
  if #bytes <= tonumber(ARGV[6]) then
    redis.call('PUBLISH', ARGV[5], (mode == 'store' and 'v' or 's') .. bytes)
  elseif mode == 'store' then
    redis.call('PUBLISH', ARGV[5], 'V')
  else
    redis.call('SET', KEYS[3], bytes, 'PX', ARGV[7])
    redis.call('PUBLISH', ARGV[5], 'S')
  end
elseif mode == 'uncacheable' then
  if #bytes > 0 and tonumber(ARGV[4]) > 0 then redis.call('SET', KEYS[1], bytes, 'PX', ARGV[4]) end
  redis.call('PUBLISH', ARGV[5], 'u')
elseif mode == 'error' then
  redis.call('PUBLISH', ARGV[5], 'e' .. bytes)
else
  redis.call('PUBLISH', ARGV[5], 'r')
end
return 1
`,
);

/** KEYS: lock. ARGV: token, lock ttl ms. Extends the lead lock while it holds this token; returns 1, or 0 when it was lost. */
export const RENEW = new LuaScript(
  'renew',
  `
local lock_key = KEYS[1]
local token = ARGV[1]
local ttl = ARGV[2]
if redis.call('GET', lock_key) == token then
  return redis.call('PEXPIRE', lock_key, ttl)
end
return 0
`,
);
