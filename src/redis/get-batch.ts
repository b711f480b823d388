import type { Redis } from 'ioredis';
import { isCluster, type CommandClient, type RedisClient } from './client.js';
import { isNodeRedis } from './node-redis.js';
import { BackendError } from '../shared/errors.js';

interface QueuedGet {
  key: string;
  resolve: (bytes: Buffer | null) => void;
  reject: (error: unknown) => void;
}

/**
 * The GETs of one tick in one socket write, on a standalone ioredis-like client: the first GET
 * of a tick is sent at once, as a plain `getBuffer`; those asked for after it in the same tick
 * wait until the tick's microtasks have run and go out together in one pipeline. Reads in
 * flight on many keys (a busy server answering hits) then cost one write per batch instead of
 * one per read; a read on its own is sent as before. Each read keeps its own reply or error.
 * (A cluster client routes commands by slot itself, and node-redis writes a tick's commands
 * together by itself: both keep `getBuffer`.)
 */
class GetBatcher {
  private open = false;
  private queued: QueuedGet[] | undefined;

  constructor(private readonly client: Redis) {}

  getBuffer(key: string): Promise<Buffer | null> {
    if (!this.open) {
      this.open = true;
      queueMicrotask(() => this.flush());
      return this.client.getBuffer(key);
    }
    return new Promise((resolve, reject) => {
      (this.queued ??= []).push({ key, resolve, reject });
    });
  }

  private flush(): void {
    this.open = false;
    const batch = this.queued;
    this.queued = undefined;
    if (batch === undefined) return;
    if (batch.length === 1) {
      const [only] = batch as [QueuedGet];
      this.client.getBuffer(only.key).then(only.resolve, only.reject);
      return;
    }
    const pipeline = this.client.pipeline();
    for (const get of batch) pipeline.getBuffer(get.key);
    pipeline.exec().then(
      (replies) => {
        for (let i = 0; i < batch.length; i++) {
          const reply = replies?.[i];
          if (reply === undefined) batch[i]!.reject(new BackendError('Redis answered no reply to a pipelined GET'));
          else if (reply[0]) batch[i]!.reject(reply[0]);
          else batch[i]!.resolve(reply[1] as Buffer | null);
        }
      },
      (error: unknown) => {
        for (const get of batch) get.reject(error);
      },
    );
  }
}

const batchers = new WeakMap<object, GetBatcher>();

/** What GETs of values go through: the client's batcher when it is a standalone ioredis-like client, else its commands. */
export function valueReader(client: RedisClient, commands: CommandClient): Pick<CommandClient, 'getBuffer'> {
  if (isNodeRedis(client) || isCluster(client) || typeof (client as Partial<Redis>).pipeline !== 'function') return commands;
  let batcher = batchers.get(client);
  if (!batcher) {
    batcher = new GetBatcher(client as unknown as Redis);
    batchers.set(client, batcher);
  }
  return batcher;
}
