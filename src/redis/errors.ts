import { isNodeRedisReplyError } from './node-redis.js';

/**
 * Which Redis failures mean "Redis is unavailable" (every key goes on without Redis for
 * `backendCooldown`) and which concern only the key at hand (that key's miss, reported as
 * `corrupt`; every other key keeps coordinating).
 *
 * Unavailable: anything that is not an error reply from the server (ioredis's `ReplyError`,
 * node-redis's `ErrorReply`) (timeouts, a lost or
 * refused connection, a client giving up its retries), and the error replies that say the
 * server, not the key, cannot serve now:
 * - `LOADING` (loading its dataset), `BUSY` (a script or function is running too long),
 * - `MASTERDOWN` (a replica lost its master), `CLUSTERDOWN`, `TRYAGAIN` (a slot is being
 *   moved), `MOVED` / `ASK` (when the client did not follow them),
 * - `READONLY` (writes reach a replica, e.g. during a failover), `NOREPLICAS`,
 *   `MISCONF` (snapshots failing, writes refused), `OOM` (maxmemory reached, writes refused),
 * - `NOAUTH`, `WRONGPASS`, `NOPERM` (the client is not allowed; a configuration matter).
 * Every other error reply (`WRONGTYPE` for a value of another Redis type, a script error
 * caused by what a key holds) is about one key.
 */
const UNAVAILABLE = new Set([
  'LOADING',
  'BUSY',
  'MASTERDOWN',
  'CLUSTERDOWN',
  'TRYAGAIN',
  'MOVED',
  'ASK',
  'READONLY',
  'NOREPLICAS',
  'MISCONF',
  'OOM',
  'NOAUTH',
  'WRONGPASS',
  'NOPERM',
]);

/** True when `error` is the server's error reply about one key, not about Redis being unusable. */
function isKeyError(error: unknown): boolean {
  if (!(error instanceof Error) || (error.name !== 'ReplyError' && !isNodeRedisReplyError(error))) return false;
  const code = /^-?([A-Z]+)\b/.exec(error.message)?.[1];
  return code !== undefined && !UNAVAILABLE.has(code);
}

/**
 * What a failed store call means for the caller: `'key'`, the server refused the command for
 * what that one key holds; `'connection'`, the store is unusable for now (every other failure).
 */
export type Fault = 'key' | 'connection';

/** The `Fault` of a failed store call. */
export function faultOf(error: unknown): Fault {
  return isKeyError(error) ? 'key' : 'connection';
}
