/**
 * The longest an operation may take, from the library's documented bounds. Every term is a
 * documented bound; OP_SLACK_MS is what the machine adds on top (scheduling of 2 shared cores
 * between the runner, the workers and two redis-servers: a worker's event loop can stall for
 * a second under that load, and the stall adds to the measured time). It is generous on
 * purpose: this check is for waits without bound (an operation that hangs for the rest of the
 * run), not for latency.
 */
import type { OpKind, RunConfig } from './history.js';

export const OP_SLACK_MS = 3000;

/** Round trips a call may make, each bounded by `commandTimeout` (lookup, subscribe, look again, commit, release). */
const ROUND_TRIPS = 5;

export function loaderBound(config: RunConfig): number {
  const longest = Math.max(config.slowLoaderMs, config.loaderMs);
  return config.hardTimeout === undefined ? longest : Math.min(longest, config.hardTimeout);
}

export function opBound(kind: OpKind, config: RunConfig): number {
  const trips = ROUND_TRIPS * config.commandTimeout;
  switch (kind) {
    case 'read':
      // A caller waits for another's loader at most waitTimeout (onWaitTimeout 'throw'); if it
      // leads, its own loader runs (bounded by hardTimeout, else by the slow loader's length).
      return config.waitTimeout + loaderBound(config) + trips + OP_SLACK_MS;
    case 'get':
    case 'set':
    case 'delete':
    case 'invalidate':
      return trips + OP_SLACK_MS;
    case 'lock':
      // acquire({ timeout }) + the hold + release.
      return config.lockAcquireTimeout + config.lockHoldMs + trips + OP_SLACK_MS;
  }
}
