import { toMs, type Duration } from '../shared/duration.js';
import { BackendError, InvalidOptionError, ReplicationError } from '../shared/errors.js';
import { isCluster, type IoRedisClient, type RedisClient } from './client.js';
import { isNodeRedis } from './node-redis.js';

/**
 * How many replicas must hold a write before it counts: `'majority'` (at least half of the
 * master's replicas, rounded up; none when it has none), a number (exactly
 * that many, whatever the master has), or 0 (do not wait: the default).
 */
export type ReplicasOption = 'majority' | number;

/** Replicas did not confirm a write in time (the store's lead; the lock has `LockReplicationError`). */
export { ReplicationError };

/** Bound of the `WAIT` for replicas when `replicaTimeout` is not given. */
export const DEFAULT_REPLICA_TIMEOUT_MS = 100;

export interface Replication {
  replicas: ReplicasOption;
  timeout: number;
}

/** Validates `replicas` and `replicaTimeout`; undefined when no wait is asked for. */
export function resolveReplication(replicas: unknown, replicaTimeout: Duration | undefined): Replication | undefined {
  const checked = replicas === undefined ? 0 : checkReplicas(replicas);
  const timeout = replicaTimeout === undefined ? DEFAULT_REPLICA_TIMEOUT_MS : toMs(replicaTimeout, 'replicaTimeout');
  return checked === 0 ? undefined : { replicas: checked, timeout };
}

/** A `replicas` option: `'majority'` or an integer from 0 to 100 (`InvalidOptionError` naming `option`). */
export function checkReplicas(replicas: unknown, option = 'replicas'): ReplicasOption {
  if (replicas !== 'majority' && !(typeof replicas === 'number' && Number.isInteger(replicas) && replicas >= 0 && replicas <= 100)) {
    throw new InvalidOptionError(option, `expected 'majority' or an integer from 0 to 100, got ${JSON.stringify(replicas)}`);
  }
  return replicas;
}

/** `replicas` asks for `WAIT`, which the library sends through ioredis-like clients only: a node-redis client is refused (`InvalidOptionError` naming `replicas`). */
export function checkReplicasClient(client: unknown, holder: 'lead' | 'lock'): void {
  if (isNodeRedis(client)) {
    throw new InvalidOptionError('replicas', `needs an ioredis or iovalkey client (WAIT is sent on the connection that took the ${holder}); with node-redis, leave replicas at 0`);
  }
}

/**
 * Waits (`WAIT n timeout`, bounded by `timeout`) until the writes made so far on the
 * connection that serves `key` reached the replicas `replication` asks for. On a cluster the
 * commands go, pipelined by `key`'s slot, to that slot's master over the client's one
 * connection to it: the one that made the write. Resolves with how many were needed and how
 * many confirmed.
 */
export async function waitForReplicas(client: RedisClient, key: string, replication: Replication): Promise<{ needed: number; confirmed: number }> {
  checkReplicasClient(client, 'lock');
  // Every ioredis-like client (ioredis 5 and 6, iovalkey) is used through ioredis 5's interface.
  const io = client as unknown as IoRedisClient;
  let needed: number;
  if (replication.replicas === 'majority') {
    needed = Math.ceil((await replicaCount(io, key)) / 2);
  } else {
    needed = replication.replicas;
  }
  if (needed === 0) return { needed, confirmed: 0 };
  const confirmed = firstReply(await io.pipeline().call('WAIT', needed, replication.timeout).pttl(key).exec());
  return { needed, confirmed: Number(confirmed) };
}

/**
 * How many replicas the master serving `key` has. On a cluster: the replicas the cluster
 * knows for it and does not consider failed (CLUSTER NODES), also one whose link is down for
 * a moment, since a failover may still promote it. Elsewhere: the connected ones (ROLE).
 */
async function replicaCount(client: IoRedisClient, key: string): Promise<number> {
  if (isCluster(client)) {
    const nodes = String(firstReply(await client.pipeline().call('CLUSTER', 'NODES').pttl(key).exec()));
    const lines = nodes.split('\n').map((line) => line.split(' '));
    const self = lines.find((fields) => fields[2]?.split(',').includes('myself'));
    if (!self) return 0;
    return lines.filter((fields) => fields[3] === self[0] && !/(^|,)fail(,|$)/.test(fields[2] ?? '')).length;
  }
  const role = firstReply(await client.pipeline().call('ROLE').pttl(key).exec());
  return Array.isArray(role) && role[0] === 'master' && Array.isArray(role[2]) ? role[2].length : 0;
}

/** The reply to a pipeline's first command (the second one only routes it by its key). */
function firstReply(results: [error: Error | null, result: unknown][] | null): unknown {
  const first = results?.[0];
  if (!first) throw new BackendError('Redis answered no reply to a pipeline');
  if (first[0]) throw first[0];
  return first[1];
}
