/**
 * Fleet scenario of the lock benchmark (`bench/lock.bench.ts`): `clients` ioredis clients in
 * this process, each contending for one lock with the library the parent names. A lane of the
 * run is a client; a call acquires the lock, holds it `holdMs` and releases it.
 *
 * Config: `{ port, clients, baseline? }`; with `baseline` (a directory), lib
 * `dogpile-guard-baseline` is the `RedisLock` of `<baseline>/src` (an earlier revision of this
 * library, for before/after numbers in one run).
 *
 * - `prepare { lib, name, holdMs }`: one lock object per client, warmed up (one uncontended
 *   acquire/release each, so scripts are loaded); `prepared`.
 * - `go` (lanes = clients): each record carries `acquired` (on the fleet's monotonic clock),
 *   `holder` (`<pid>/<client>`), `woken` (when this process dispatched the pub/sub message the
 *   acquisition woke on, if one came while it waited) and `releasing` (when release() was called); `done` adds `sent` (the commands this process wrote to Redis,
 *   by name) and this process's event-loop delay during the run (`loopDelayP99`, `loopDelayMax`, ms).
 */
import { createRequire } from 'node:module';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command, Redis } from 'ioredis';
import { Mutex } from 'redis-semaphore';
import { RedisLock } from '../../src/index.js';
import { sleep } from '../../tools/basics.js';
import { runMember } from '../../tools/fleet/member.js';
import { monotonicMs } from '../../tools/fleet/plan.js';

export type Lib = 'dogpile-guard' | 'dogpile-guard-baseline' | 'redlock' | 'redis-semaphore';

/** The slice of the redlock 4 API used here (the package ships no types). */
interface RedlockLock {
  unlock(): Promise<void>;
}
interface Redlock {
  lock(resource: string, ttl: number): Promise<RedlockLock>;
}
type RedlockCtor = new (clients: Redis[], options: { retryCount?: number; retryDelay?: number; retryJitter?: number }) => Redlock;

/** Lock TTL for every library: far longer than a hold, so no renewal or expiry happens. */
const TTL = 10_000;
/** The event-loop delay monitor's timer interval (Node's default). */
const LOOP_DELAY_RESOLUTION_MS = 10;
/** Long enough never to give up in this benchmark. */
const ACQUIRE_TIMEOUT = 120_000;

/** acquire() then release() of one client's lock object. */
interface Contender {
  acquire(): Promise<void>;
  release(): Promise<void>;
}

function contender(lib: Lib, client: Redis, name: string, Baseline: typeof RedisLock | undefined): Contender {
  switch (lib) {
    case 'dogpile-guard':
    case 'dogpile-guard-baseline': {
      const Lock = lib === 'dogpile-guard' ? RedisLock : Baseline;
      if (!Lock) throw new Error('dogpile-guard-baseline needs a baseline directory');
      const lock = new Lock(client, name, { ttl: TTL });
      return {
        acquire: async () => void (await lock.acquire({ timeout: ACQUIRE_TIMEOUT })),
        release: async () => void (await lock.release()),
      };
    }
    case 'redlock': {
      // Defaults (retryDelay 200 ms, retryJitter 100 ms, driftFactor 0.01) except retryCount,
      // raised from 10 so that no acquisition gives up.
      const Redlock = createRequire(import.meta.url)('redlock') as RedlockCtor;
      const redlock = new Redlock([client], { retryCount: 10_000 });
      let held: RedlockLock | undefined;
      return {
        acquire: async () => void (held = await redlock.lock(name, TTL)),
        release: async () => {
          await held!.unlock();
          held = undefined;
        },
      };
    }
    case 'redis-semaphore': {
      // Defaults (retryInterval 10 ms, refresh every 0.8 × lockTimeout) except acquireTimeout.
      const mutex = new Mutex(client, name, { lockTimeout: TTL, acquireTimeout: ACQUIRE_TIMEOUT });
      return { acquire: () => mutex.acquire(), release: () => mutex.release() };
    }
  }
}

runMember<{ port: number; clients: number; baseline?: string }>({
  async start(config) {
    const Baseline = config.baseline
      ? ((await import(pathToFileURL(path.join(config.baseline, 'src', 'index.ts')).href)) as { RedisLock: typeof RedisLock }).RedisLock
      : undefined;
    // Count every command this process writes to a socket (all connections, duplicates included).
    const sent = new Map<string, number>();
    const toWritable = Command.prototype.toWritable;
    Command.prototype.toWritable = function (this: Command, socket: unknown) {
      sent.set(this.name, (sent.get(this.name) ?? 0) + 1);
      return toWritable.call(this, socket as never);
    };
    // When this process last dispatched a pub/sub message (on any connection: a lock's wake-up
    // arrives on the subscriber the library opened), for the split of a hand-off's gap.
    let lastMessageAt = Number.NaN;
    const emit = Redis.prototype.emit;
    Redis.prototype.emit = function (this: Redis, event: string | symbol, ...args: unknown[]) {
      if (event === 'messageBuffer') lastMessageAt = monotonicMs();
      return emit.call(this, event, ...args);
    };
    const clients = Array.from({ length: config.clients }, () => new Redis({ port: config.port, host: '127.0.0.1' }));
    await Promise.all(clients.map((c) => c.ping()));
    let contenders: Contender[] = [];
    let holdMs = 0;
    let delay: IntervalHistogram | undefined;
    return {
      async prepare(command) {
        holdMs = Number(command.holdMs ?? 0);
        contenders = clients.map((c) => contender(command.lib as Lib, c, String(command.name), Baseline));
        for (const c of contenders) {
          await c.acquire();
          await c.release();
        }
      },
      beforeRun() {
        sent.clear();
        // How late timers and I/O callbacks ran: on a shared machine, mostly waiting for a CPU.
        // Node's default resolution: at 1 ms the monitor's own timer woke every worker a thousand
        // times a second, and the gaps' p99 was higher in three alternated pairs of runs
        // (bench/RESULTS.md, "Timed without MONITOR").
        delay = monitorEventLoopDelay({ resolution: LOOP_DELAY_RESOLUTION_MS });
        delay.enable();
      },
      async call({ lane }) {
        const c = contenders[lane]!;
        const start = monotonicMs();
        await c.acquire();
        const acquired = monotonicMs();
        // The message this acquisition woke on: the last one dispatched before it resolved.
        const woken = lastMessageAt > start ? lastMessageAt : undefined;
        await sleep(holdMs);
        const releasing = monotonicMs();
        await c.release();
        return { acquired, holder: `${process.pid}/${lane}`, woken, releasing };
      },
      report() {
        delay?.disable();
        // The histogram holds the intervals between the monitor's timer runs: late by what exceeds its resolution.
        const late = (ns: number) => Math.max(0, ns / 1e6 - LOOP_DELAY_RESOLUTION_MS);
        return { sent: Object.fromEntries(sent), loopDelayP99: late(delay?.percentile(99) ?? 0), loopDelayMax: late(delay?.max ?? 0) };
      },
      async close() {
        await Promise.all(clients.map((c) => c.quit()));
      },
    };
  },
});
