import type { EntryCodec } from './codec.js';
import { CorruptEntryError } from './entry.js';
import { ForeignEntries, forKey } from './foreign-entries.js';
import { cacheKeys, valueKey } from './key.js';
import { L1 } from './l1.js';
import { L1Links } from './l1-links.js';
import { parseOutcome } from './outcome-message.js';
import { RedisTagStamps } from './redis-tags.js';
import { monotonicNow } from '../shared/clock.js';
import { clientAvailable, commandClient, isAnyCluster, type CommandClient, type RedisClient } from '../redis/client.js';
import { faultOf } from '../redis/errors.js';
import { existingSharedSubscriber, sharedSubscriber, type Unlisten } from '../redis/subscriber.js';
import { knownPubSubMode, publishCommand, pubSubMode } from '../redis/pubsub-mode.js';
import { waitForReplicas, ReplicationError, type Replication } from '../redis/replication.js';
import { EXTEND } from '../redis/extend-script.js';
import { valueReader } from '../redis/get-batch.js';
import { ServerClock } from '../redis/server-clock.js';
import { BackendError, UnknownSerializerError } from '../shared/errors.js';
import { COMMIT, DELETE_ANNOUNCE, LOOKUP, SET_ANNOUNCE, TRY_LEAD } from './cache-scripts.js';
import { stamped, WriteTimes } from './write-times.js';
import type { Commit, Lookup, LookupRequest, Outcome, Store, StoredEntry } from './types.js';

interface RedisBackendOptions {
  prefix: string;
  codec: EntryCodec;
  inlineMax: number;
  /** A copy in process memory of the values this process saw (`peek` reads it), kept coherent through the keys' channels. */
  l1: { max: number; ttl: number; maxSize?: number | undefined } | undefined;
  /** Closes the client in `close()`: given only when the library made it (see redis/connection.ts). */
  closeClient?: (() => Promise<void>) | undefined;
  /** Replicas that must confirm a lead before it counts (none when undefined). */
  replication?: Replication | undefined;
  /**
   * How long a caller waits for a write (the cache's `commandTimeout`): a `set` or `delete`
   * that reaches Redis later than that is refused there, so a write its caller gave up on
   * never lands over a newer one. 0: no limit.
   */
  writeTimeout?: number;
}

const EMPTY = Buffer.alloc(0);

/**
 * Entries in Redis, coordinated across processes: one Lua round trip to look up or lead,
 * one to store, release and announce; waiters listen on the key's channel through the
 * client's shared subscriber connection.
 */
export class RedisBackend implements Store {
  readonly distributed = true;
  readonly peekLayer = 'l1';
  /** True with an L1. */
  readonly holdsInMemory: boolean;

  readonly tagStamps: RedisTagStamps;
  /** The commands this backend sends (the full client is kept for its status, its subscriber and closing). */
  private readonly commands: CommandClient;
  /** Where the GETs of values go (the GETs of one tick share a write on a standalone ioredis-like client). */
  private readonly values: Pick<CommandClient, 'getBuffer'>;
  /** Keys of different slots cannot share one `MGET`. */
  private readonly cluster: boolean;
  private readonly l1: L1 | undefined;
  /** The channels this process follows for its L1 copies. */
  private readonly links: L1Links | undefined;
  /** When (monotonic ms) the read or write that produced an entry was sent, for entries that may go to L1. */
  private readonly sentAt = new WeakMap<StoredEntry, number>();
  /** One message, parsed once for every listener of its channel (waiters and the L1 link). */
  private readonly parsed = new WeakMap<Buffer, Outcome>();
  /** The server's clock, read without a round trip. */
  readonly clock: ServerClock;
  /** The server's times this backend's writes carry (its leads' starts, the writes' deadlines). */
  private readonly times: WriteTimes;
  /** Fresh entries of a serializer this process cannot read: reported once, looked past, never replaced. */
  private readonly foreign = new ForeignEntries();

  constructor(
    private readonly client: RedisClient,
    private readonly options: RedisBackendOptions,
  ) {
    this.commands = commandClient(client);
    this.clock = new ServerClock(this.commands);
    this.times = new WriteTimes(this.clock, options.writeTimeout ?? 0);
    this.now = this.clock.now.bind(this.clock);
    this.values = valueReader(client, this.commands);
    this.cluster = isAnyCluster(client);
    this.tagStamps = new RedisTagStamps(client, this.commands, options.prefix);
    this.l1 = options.l1 ? new L1(options.l1.max, options.l1.ttl, (key) => this.links?.unlink(key), options.l1.maxSize) : undefined;
    this.holdsInMemory = this.l1 !== undefined;
    this.links = this.l1 ? new L1Links(client, options.prefix, this.l1, this.sentAt, this.now, (message) => this.parseMessage(message)) : undefined;
  }

  /** False while the client is known to be disconnected; a client still connecting is given its chance. */
  available(): boolean {
    return clientAvailable(this.client);
  }

  /** The Redis server's time (ms since the epoch), estimated without a round trip: the one clock of the fleet. */
  readonly now: () => number;

  live(key: string): boolean {
    return existingSharedSubscriber(this.client)?.isLive(cacheKeys(this.options.prefix, key).channel) === true;
  }

  peek(key: string): StoredEntry | undefined {
    return this.l1?.get(key);
  }

  peekStale(key: string): StoredEntry | undefined {
    return this.l1?.stale(key);
  }

  forget(key?: string): void {
    if (key === undefined) this.l1?.clear();
    else this.l1?.delete(key);
  }

  /**
   * Keeps `entry` in L1. It is served as a hit only when the key's channel was followed before
   * the read (or write) that produced it was sent: then every later write or delete of the key
   * is heard of here. Otherwise the channel is followed from now on and the copy is only a
   * fallback (the next read makes it a hit), unless Redis is unusable right now (then it is
   * served for at most `l1.ttl`, as nothing else could be).
   */
  keep(key: string, entry: StoredEntry, left: number, staleLeft = left): void {
    const l1 = this.l1;
    if (!l1 || !this.links) return;
    const link = this.links.get(key);
    const sent = this.sentAt.get(entry);
    const followed = link?.liveAt !== undefined && sent !== undefined && sent >= link.liveAt;
    l1.keep(key, entry, followed || !this.available() ? left : 0, staleLeft);
    if (!link) this.links.follow(key);
  }

  async lookup(request: LookupRequest): Promise<Lookup> {
    const { key, token, lockTtl, skip, expired = false, tryLead = true } = request;
    const k = cacheKeys(this.options.prefix, key);
    // A value this process may keep in L1 is coming (a lead's result, a waiter's announcement,
    // a stale value's refresh): follow the key's channel from now on, so that it can be served
    // from L1 as soon as it arrives.
    if (this.links && !this.links.has(key)) this.links.follow(key);
    const sent = monotonicNow();
    const reply = await LOOKUP.runBuffer(this.commands, [k.value, k.lock], [
      token,
      lockTtl,
      skip === undefined ? '0' : skip === 'any' ? '1' : `<${skip.createdUpTo}`,
      expired ? '1' : '0',
      tryLead ? '1' : '0',
      this.times.notAfter(),
      this.clock.known ? '0' : '1',
    ]);
    // A wait carries no reading of the server's clock once this process has one (see LOOKUP).
    const text = String(reply[1]);
    const time = text === '' ? Number.NaN : Number(text);
    if (text !== '') this.clock.observe(time, sent, monotonicNow());
    switch (reply[0]) {
      case 5: {
        const decoded = this.decode(reply[2], sent);
        if ('error' in decoded && decoded.error instanceof UnknownSerializerError && reply[3] === 1) {
          // Past its expiry and the lead is ours: replaced like any expired value.
          this.times.leadTaken(token, time);
          return { kind: 'lead' };
        }
        if ('error' in decoded) return this.unreadable(request, decoded.error);
        if (reply[3] === 1) this.times.leadTaken(token, time);
        return reply[3] === 1
          ? { kind: 'stale', entry: decoded, lead: true, remaining: 0, hold: false }
          : { kind: 'stale', entry: decoded, lead: false, remaining: Number(reply[4]), hold: reply[5] === 1 };
      }
      case 1: {
        const decoded = this.decode(reply[2], sent);
        return 'error' in decoded ? this.unreadable(request, decoded.error) : { kind: 'hit', entry: decoded };
      }
      case 2:
        this.times.leadTaken(token, time);
        if (this.options.replication) await this.leadReplicated(key, k.lock, token, this.options.replication);
        return { kind: 'lead' };
      case 4:
        return { kind: 'corrupt', error: new CorruptEntryError(`a foreign value: ${String(reply[2])}`) };
      default:
        return reply[3] === 1
          ? { kind: 'wait', remaining: Number(reply[2]), repaired: new CorruptEntryError(`the lock key had no expiry (written by another program, or PERSISTed); it now expires in ${lockTtl} ms`) }
          : { kind: 'wait', remaining: Number(reply[2]) };
    }
  }

  /**
   * A stored entry that does not decode. One of a serializer this process cannot read is
   * reported once per key (`corrupt`: the caller then looks past it and leads or waits);
   * after that, the lookup looks past it at once while it is the entry the key holds.
   */
  private unreadable(request: LookupRequest, error: Error): Lookup | Promise<Lookup> {
    const key = request.key;
    if (!(error instanceof UnknownSerializerError)) return { kind: 'corrupt', error };
    if (this.foreign.met(key, error)) return { kind: 'corrupt', error: forKey(error, key) };
    const createdAt = error.entry?.createdAt;
    return createdAt === undefined ? { kind: 'corrupt', error } : this.lookup({ ...request, skip: { createdUpTo: createdAt }, expired: false });
  }

  /**
   * With `replicas`: returns once enough replicas hold the lead lock; else releases the lead
   * (its waiters hear 'released' and look again) and throws, so the call goes on as after a
   * Redis failure.
   */
  private async leadReplicated(key: string, lock: string, token: string, replication: Replication): Promise<void> {
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
    // A fresh entry this process cannot read is another serializer's: shared, never replaced.
    if (commit.mode === 'store' && this.foreign.freshAt(key, this.clock.now()) !== undefined) commit = { ...commit, mode: 'share' };
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
    const pub = publishCommand(knownPubSubMode(this.client) ?? (await pubSubMode(this.client)));
    if (this.l1 && commit.mode === 'store') this.sentAt.set(commit.entry, monotonicNow());
    const started = this.times.commitStart(token, commit.mode === 'store' || commit.mode === 'share' ? commit.entry.delta : undefined, commit.mode === 'fail');
    const committing = COMMIT.run(this.commands, [k.value, k.lock, k.shared], [
      token,
      commit.mode,
      bytes,
      Math.max(1, Math.ceil(ttl)),
      k.channel,
      this.options.inlineMax,
      Math.max(1, Math.ceil(sharedTtl)),
      pub,
      started,
    ]);
    if (commit.mode === 'store' || commit.mode === 'share') commit.sent?.();
    const reply = await committing;
    if (reply === 0) return false;
    // The entry as the server stamped it: created at its time, Δ since the lead was taken.
    if (commit.mode === 'store' || commit.mode === 'share') stamped(commit.entry, reply[1], reply[2]);
    else if (commit.mode === 'uncacheable' && commit.marker) stamped(commit.marker, reply[1], reply[2]);
    return true;
  }

  async tryLead(key: string, token: string, lockTtl: number): Promise<boolean> {
    // The run begins after the lock is taken: the server's time before the command was sent is no later.
    const before = this.clock.now() - this.clock.uncertainty;
    // Taken only while its caller still waits for the answer (a late command takes nothing).
    const led = (await TRY_LEAD.run(this.commands, [cacheKeys(this.options.prefix, key).lock], [token, Math.max(1, Math.ceil(lockTtl)), this.times.notAfter()])) === 1;
    if (led) this.times.leadTaken(token, before);
    return led;
  }

  async renew(key: string, token: string, lockTtl: number): Promise<boolean> {
    return (await EXTEND.run(this.commands, [cacheKeys(this.options.prefix, key).lock], [token, lockTtl])) === 1;
  }

  listen(key: string, listener: (outcome: Outcome | null) => void): Promise<Unlisten> {
    return sharedSubscriber(this.client).listen(cacheKeys(this.options.prefix, key).channel, (message) => {
      listener(message === null ? null : this.parseMessage(message));
    });
  }

  get(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    // The first read waits for the server's clock, so its freshness is judged on it.
    if (!this.clock.known) return this.clock.ready().then(() => this.readValue(key));
    return this.readValue(key);
  }

  private readValue(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    // The hit path: one GET and one step after it (no async frame).
    const sent = this.l1 ? monotonicNow() : undefined;
    return this.values.getBuffer(valueKey(this.options.prefix, key)).then((bytes) => (bytes === null ? undefined : this.found(key, bytes, sent)));
  }

  /** A stored value's bytes as the entry, or `corrupt`; an entry of another serializer (reported once) is a miss here. */
  private found(key: string, bytes: Buffer, sent: number | undefined): StoredEntry | { corrupt: Error } | undefined {
    const decoded = this.decode(bytes, sent);
    if (!('error' in decoded)) return decoded;
    if (!(decoded.error instanceof UnknownSerializerError)) return { corrupt: decoded.error };
    return this.foreign.met(key, decoded.error) ? { corrupt: forKey(decoded.error, key) } : undefined;
  }

  async getMany(keys: readonly string[]): Promise<(StoredEntry | { corrupt: Error } | undefined)[]> {
    if (keys.length === 0) return [];
    if (!this.clock.known) await this.clock.ready();
    const sent = this.l1 ? monotonicNow() : undefined;
    const names = keys.map((key) => valueKey(this.options.prefix, key));
    let replies: (Buffer | null | { corrupt: Error })[];
    if (!this.cluster) {
      replies = (await this.commands.callBuffer('MGET', ...names)) as (Buffer | null)[];
    } else {
      // Keys of different slots: one GET each, sent together; an error about one key is that key's.
      const settled = await Promise.allSettled(names.map((name) => this.values.getBuffer(name)));
      replies = settled.map((s) => {
        if (s.status === 'fulfilled') return s.value;
        if (faultOf(s.reason) === 'key') return { corrupt: s.reason as Error };
        throw s.reason;
      });
    }
    return replies.map((bytes, i) => (bytes === null || bytes === undefined ? undefined : Buffer.isBuffer(bytes) ? this.found(keys[i]!, bytes, sent) : bytes));
  }

  async getShared(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    const bytes = await this.commands.getBuffer(cacheKeys(this.options.prefix, key).shared);
    if (bytes === null) return undefined;
    const decoded = this.decode(bytes);
    // Shared by a leader of another serializer: nothing for this process (it looks again).
    if ('error' in decoded && decoded.error instanceof UnknownSerializerError) return undefined;
    return 'error' in decoded ? { corrupt: decoded.error } : decoded;
  }

  /** Stores `entry` and announces it on the key's channel (waiters take it; other processes' copies follow). */
  async set(key: string, entry: StoredEntry, write = true): Promise<void> {
    // The first write waits for the server's clock, so that a late arrival can be told.
    if (!this.clock.known) await this.clock.ready();
    const bytes = this.options.codec.encode(key, entry);
    const k = cacheKeys(this.options.prefix, key);
    const pub = publishCommand(knownPubSubMode(this.client) ?? (await pubSubMode(this.client)));
    if (this.l1) this.sentAt.set(entry, monotonicNow());
    const reply = await SET_ANNOUNCE.run(this.commands, [k.value, k.lock], [
      bytes,
      Math.max(1, Math.ceil(entry.ttl + (entry.stale ?? 0))),
      k.channel,
      this.options.inlineMax,
      pub,
      this.times.startedBefore(entry.delta),
      this.times.notAfter(),
      write ? '1' : '0',
    ]);
    if (reply === 0) throw new BackendError(`the write of "${key}" reached Redis after its caller had given up (commandTimeout); it was not applied`, { key });
    stamped(entry, reply[0], reply[1]);
  }

  /** Deletes `key` and announces it, so every process drops its copy. */
  async delete(key: string): Promise<boolean> {
    // This process stops serving its copy at once; the delete's time (the server's) then drops
    // any copy that a read in flight brings back.
    this.l1?.untrust(key);
    if (!this.clock.known) await this.clock.ready();
    const k = cacheKeys(this.options.prefix, key);
    const pub = publishCommand(knownPubSubMode(this.client) ?? (await pubSubMode(this.client)));
    const reply = await DELETE_ANNOUNCE.run(this.commands, [k.value, k.lock], [k.channel, pub, this.times.notAfter()]);
    if (reply === 0) throw new BackendError(`the delete of "${key}" reached Redis after its caller had given up (commandTimeout); it was not applied`, { key });
    this.l1?.heard(key, Number(reply[1]));
    return reply[0] > 0;
  }

  async close(): Promise<void> {
    this.l1?.clear();
    this.tagStamps.close();
    await this.options.closeClient?.();
  }

  private decode(bytes: Buffer, sent?: number): StoredEntry | { error: Error } {
    const decoded = this.options.codec.decode(bytes);
    if (sent !== undefined && this.l1 && !('error' in decoded)) this.sentAt.set(decoded, sent);
    return decoded;
  }

  /** One message, parsed once for every listener of its channel (waiters and the L1 link). */
  private parseMessage(message: Buffer): Outcome {
    let outcome = this.parsed.get(message);
    if (outcome === undefined) {
      outcome = parseOutcome(message, this.options.codec, this.options.inlineMax);
      this.parsed.set(message, outcome);
    }
    return outcome;
  }
}
