import type { EntryCodec } from './codec.js';
import { CorruptEntryError } from './entry.js';
import { cacheKeys, valueKey } from './key.js';
import type { L1 } from './l1.js';
import { clientAvailable, closeClient, commandClient, type CommandClient, type RedisClient } from '../redis/client.js';
import { sharedSubscriber } from '../redis/subscriber.js';
import { publishCommand, pubSubMode } from '../redis/pubsub-mode.js';
import { waitForReplicas, ReplicationError, type Replication } from '../redis/replication.js';
import { EXTEND } from '../redis/extend-script.js';
import { COMMIT, LOOKUP } from './cache-scripts.js';
import type { Backend, Commit, Lookup, Outcome, StoredEntry } from './types.js';

export interface RedisBackendOptions {
  prefix: string;
  codec: EntryCodec;
  inlineMax: number;
  /** A short-lived copy in process memory of the values this process saw (`peek` reads it). */
  l1: L1 | undefined;
  /** Close the client in `close()` (only when the cache created it). */
  ownsClient: boolean;
  /** Replicas that must confirm a lead before it counts (none when undefined). */
  replication?: Replication | undefined;
}

const EMPTY = Buffer.alloc(0);

/**
 * Entries in Redis, coordinated across processes: one Lua round trip to look up or lead,
 * one to store, release and announce; waiters listen on the key's channel through the
 * client's shared subscriber connection.
 */
export class RedisBackend implements Backend {
  readonly distributed = true;
  readonly peekLayer = 'l1';

  /** The commands this backend sends (the full client is kept for its status, its subscriber and closing). */
  private readonly commands: CommandClient;

  constructor(
    private readonly client: RedisClient,
    private readonly options: RedisBackendOptions,
  ) {
    this.commands = commandClient(client);
  }

  /** False while the client is known to be disconnected; a client still connecting is given its chance. */
  available(): boolean {
    return clientAvailable(this.client);
  }

  peek(key: string): StoredEntry | undefined {
    return this.options.l1?.get(key);
  }

  peekStale(key: string): StoredEntry | undefined {
    return this.options.l1?.stale(key);
  }

  keep(key: string, entry: StoredEntry, left: number, staleLeft = left): void {
    this.options.l1?.keep(key, entry, left, staleLeft);
  }

  async lookup(key: string, token: string, lockTtl: number, skipValue: boolean, now = Date.now(), tryLead = true): Promise<Lookup> {
    const k = cacheKeys(this.options.prefix, key);
    const reply = await LOOKUP.runBuffer(this.commands, [k.value, k.lock], [token, lockTtl, skipValue ? '1' : '0', now, tryLead ? '1' : '0']);
    switch (reply[0]) {
      case 5: {
        const decoded = this.decode(reply[1]);
        if ('error' in decoded) return { kind: 'corrupt', error: decoded.error };
        return reply[2] === 1
          ? { kind: 'stale', entry: decoded, lead: true, remaining: 0, hold: false }
          : { kind: 'stale', entry: decoded, lead: false, remaining: Number(reply[3]), hold: reply[4] === 1 };
      }
      case 1: {
        const decoded = this.decode(reply[1]);
        return 'error' in decoded ? { kind: 'corrupt', error: decoded.error } : { kind: 'hit', entry: decoded };
      }
      case 2:
        await this.leadReplicated(key, k.lock, token);
        return { kind: 'lead' };
      case 4:
        return { kind: 'corrupt', error: new CorruptEntryError(`a foreign value: ${String(reply[1])}`) };
      default:
        return reply[2] === 1
          ? { kind: 'wait', remaining: Number(reply[1]), repaired: new CorruptEntryError(`the lock key had no expiry (written by another program, or PERSISTed); it now expires in ${lockTtl} ms`) }
          : { kind: 'wait', remaining: Number(reply[1]) };
    }
  }

  /**
   * With `replicas`: returns once enough replicas hold the lead lock; else releases the lead
   * (its waiters hear 'released' and look again) and throws, so the call goes on as after a
   * Redis failure.
   */
  private async leadReplicated(key: string, lock: string, token: string): Promise<void> {
    const replication = this.options.replication;
    if (!replication) return;
    let outcome: { needed: number; confirmed: number } | undefined;
    try {
      outcome = await waitForReplicas(this.client, lock, replication);
    } finally {
      if (!outcome || outcome.confirmed < outcome.needed) await this.commit(key, token, { mode: 'release' }).catch(() => {});
    }
    if (outcome.confirmed < outcome.needed) {
      throw new ReplicationError(`the lead of "${key}" reached ${outcome.confirmed} of the ${outcome.needed} replicas asked for within ${replication.timeout} ms; it was released`);
    }
  }

  async commit(key: string, token: string, commit: Commit): Promise<boolean> {
    let bytes: Buffer = EMPTY;
    let ttl = 0;
    let sharedTtl = 1000;
    switch (commit.mode) {
      case 'store':
      case 'share':
        bytes = this.options.codec.encode(key, commit.entry);
        ttl = commit.entry.ttl + (commit.entry.stale ?? 0);
        sharedTtl = commit.sharedTtl;
        break;
      case 'uncacheable':
        if (commit.marker) {
          bytes = this.options.codec.encode(key, commit.marker);
          ttl = commit.marker.ttl;
        }
        break;
      case 'error':
        bytes = Buffer.from(JSON.stringify({ name: commit.name, message: commit.message }));
        break;
      case 'fail':
        bytes = Buffer.from(JSON.stringify({ name: commit.name, message: commit.message }));
        ttl = commit.holdMs;
        break;
      default:
        break;
    }
    const k = cacheKeys(this.options.prefix, key);
    const pub = publishCommand(await pubSubMode(this.client));
    const result = await COMMIT.run(this.commands, [k.value, k.lock, k.shared], [
      token,
      commit.mode,
      bytes,
      Math.max(1, Math.ceil(ttl)),
      k.channel,
      this.options.inlineMax,
      Math.max(1, Math.ceil(sharedTtl)),
      pub,
    ]);
    return result === 1;
  }

  async tryLead(key: string, token: string, lockTtl: number): Promise<boolean> {
    return (await this.commands.call('SET', cacheKeys(this.options.prefix, key).lock, token, 'PX', Math.max(1, Math.ceil(lockTtl)), 'NX')) === 'OK';
  }

  async renew(key: string, token: string, lockTtl: number): Promise<boolean> {
    return (await EXTEND.run(this.commands, [cacheKeys(this.options.prefix, key).lock], [token, lockTtl])) === 1;
  }

  listen(key: string, listener: (outcome: Outcome | null) => void): Promise<() => void> {
    return sharedSubscriber(this.client).listen(cacheKeys(this.options.prefix, key).channel, (message) => {
      listener(message === null ? null : this.parseMessage(message));
    });
  }

  async get(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    const bytes = await this.commands.getBuffer(valueKey(this.options.prefix, key));
    if (bytes === null) return undefined;
    const decoded = this.decode(bytes);
    return 'error' in decoded ? { corrupt: decoded.error } : decoded;
  }

  async getShared(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    const bytes = await this.commands.getBuffer(cacheKeys(this.options.prefix, key).shared);
    if (bytes === null) return undefined;
    const decoded = this.decode(bytes);
    return 'error' in decoded ? { corrupt: decoded.error } : decoded;
  }

  async set(key: string, entry: StoredEntry): Promise<void> {
    const bytes = this.options.codec.encode(key, entry);
    await this.commands.set(valueKey(this.options.prefix, key), bytes, 'PX', Math.max(1, Math.ceil(entry.ttl + (entry.stale ?? 0))));
  }

  async delete(key: string): Promise<boolean> {
    this.options.l1?.delete(key);
    return (await this.commands.del(valueKey(this.options.prefix, key))) > 0;
  }

  async close(): Promise<void> {
    this.options.l1?.clear();
    if (this.options.ownsClient) {
      await closeClient(this.client);
    }
  }

  private decode(bytes: Buffer): StoredEntry | { error: Error } {
    return this.options.codec.decode(bytes);
  }

  private parseMessage(message: Buffer): Outcome {
    switch (message[0]) {
      case 0x76: /* v: stored and inline */
      case 0x73: /* s: shared, not stored */ {
        const decoded = this.decode(message.subarray(1));
        return 'error' in decoded ? { kind: 'corrupt', error: decoded.error } : { kind: 'value', entry: decoded, stored: message[0] === 0x76 };
      }
      case 0x56: /* V */
        return { kind: 'stored' };
      case 0x53: /* S */
        return { kind: 'shared' };
      case 0x65: /* e */ {
        try {
          const { name, message: text } = JSON.parse(message.subarray(1).toString('utf8')) as { name: string; message: string };
          return { kind: 'error', name: String(name), message: String(text) };
        } catch {
          return { kind: 'error', name: 'Error', message: 'the loader failed in another process' };
        }
      }
      case 0x75: /* u */
        return { kind: 'uncacheable' };
      default:
        return { kind: 'released' };
    }
  }
}
