import type { Cluster } from 'ioredis';
import { isCluster, type RedisClient } from './client.js';

/**
 * How wake-ups and outcomes travel for a client: `sharded` (SPUBLISH / SSUBSCRIBE, Redis ≥ 7,
 * on a cluster: a message stays on the shard of its channel's slot instead of crossing the
 * whole cluster bus) or `plain` (PUBLISH / SUBSCRIBE: a single server, a Sentinel setup, or a
 * cluster whose servers lack sharded pub/sub, e.g. Redis 6.2).
 *
 * Every process must pick the same mode for the same deployment, so the choice depends only on
 * the server: a cluster whose nodes know SPUBLISH is sharded, anything else is plain.
 */
type PubSubMode = 'sharded' | 'plain';

const modes = new WeakMap<Cluster, Promise<PubSubMode>>();
/** The modes of the clusters whose probe has answered. */
const known = new WeakMap<Cluster, PubSubMode>();

/** The pub/sub mode of `client`, asked of the server once per client (`COMMAND INFO SPUBLISH`). */
export function pubSubMode(client: RedisClient): Promise<PubSubMode> {
  if (!isCluster(client)) return PLAIN;
  let mode = modes.get(client);
  if (!mode) {
    mode = detect(client);
    const cluster = client;
    mode.then((m) => known.set(cluster, m), () => {});
    // A failed probe (cluster unreachable) is not remembered: the next call asks again.
    mode.catch(() => modes.delete(client));
    modes.set(client, mode);
  }
  return mode;
}

/**
 * The pub/sub mode of `client` when it is known without asking (a single server, or a cluster
 * already probed), else `undefined`: the hot paths publish without waiting a promise hop.
 */
export function knownPubSubMode(client: RedisClient): PubSubMode | undefined {
  return isCluster(client) ? known.get(client) : 'plain';
}

const PLAIN: Promise<PubSubMode> = Promise.resolve('plain');

async function detect(cluster: Cluster): Promise<PubSubMode> {
  // An unknown command (Redis < 7, or one renamed away) is answered with a nil entry.
  const reply = (await cluster.call('COMMAND', 'INFO', 'SPUBLISH', 'SSUBSCRIBE')) as unknown[];
  return Array.isArray(reply) && reply.length === 2 && reply.every((entry) => Array.isArray(entry)) ? 'sharded' : 'plain';
}

/** The command a Lua script publishes with in `mode`. */
export function publishCommand(mode: PubSubMode): 'SPUBLISH' | 'PUBLISH' {
  return mode === 'sharded' ? 'SPUBLISH' : 'PUBLISH';
}

/** The hash slot of `key` (CRC16/XMODEM of its hash tag, or of the whole key, mod 16384). */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key);
  let start = 0;
  let end = bytes.length;
  const open = bytes.indexOf(0x7b); // {
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc ^= bytes[i]! << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}
