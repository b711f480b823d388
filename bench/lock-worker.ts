/**
 * One process of the lock benchmark: `--clients` ioredis clients, each contending for one
 * lock with the library the parent names. Driven by JSON lines on stdin:
 *   {"cmd":"prepare","lib","name"}  creates one lock object per client and warms up (one
 *                                   uncontended acquire/release each, so scripts are loaded)
 *   {"cmd":"run","perClient","holdMs"}  every client acquires `perClient` times, holding `holdMs`
 *   {"cmd":"exit"}
 * Answers `prepared` and `done` (per acquisition: acquire start, acquire end, release end, as
 * wall-clock ms comparable across processes, and which client; and the commands this process
 * wrote to Redis).
 * With `--baseline <dir>`, lib `dogpile-guard-baseline` is the `RedisLock` of `<dir>/src` (an
 * earlier revision of this library, for before/after numbers in one run).
 */
import { createRequire } from 'node:module';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command, Redis } from 'ioredis';
import { Mutex } from 'redis-semaphore';
import { RedisLock } from '../src/index.js';

export type Lib = 'dogpile-guard' | 'dogpile-guard-baseline' | 'redlock' | 'redis-semaphore';

/** The slice of the redlock 4 API used here (the package ships no types). */
interface RedlockLock {
  unlock(): Promise<void>;
}
interface Redlock {
  lock(resource: string, ttl: number): Promise<RedlockLock>;
}
type RedlockCtor = new (clients: Redis[], options: { retryCount?: number; retryDelay?: number; retryJitter?: number }) => Redlock;
const RedlockClass = createRequire(import.meta.url)('redlock') as RedlockCtor;

/** Lock TTL for every library: far longer than a hold, so no renewal or expiry happens. */
const TTL = 10_000;
/** Long enough never to give up in this benchmark. */
const ACQUIRE_TIMEOUT = 120_000;

function arg(name: string, fallback?: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const value = i === -1 ? fallback : process.argv[i + 1];
  if (value === undefined) throw new Error(`missing --${name}`);
  return value;
}

const baselineDir = arg('baseline', '');
const BaselineRedisLock = baselineDir
  ? ((await import(pathToFileURL(path.join(baselineDir, 'src', 'index.ts')).href)) as { RedisLock: typeof RedisLock }).RedisLock
  : undefined;

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const send = (message: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(message)}\n`);

// Count every command this process writes to a socket (all connections, duplicates included).
const sent = new Map<string, number>();
const toWritable = Command.prototype.toWritable;
Command.prototype.toWritable = function (this: Command, socket: unknown) {
  sent.set(this.name, (sent.get(this.name) ?? 0) + 1);
  return toWritable.call(this, socket as never);
};

const port = Number(arg('port'));
const clients = Array.from({ length: Number(arg('clients')) }, () => new Redis({ port, host: '127.0.0.1' }));

/** acquire() then release() of one client's lock object. */
interface Contender {
  acquire(): Promise<void>;
  release(): Promise<void>;
}

function contender(lib: Lib, client: Redis, name: string): Contender {
  switch (lib) {
    case 'dogpile-guard':
    case 'dogpile-guard-baseline': {
      const Lock = lib === 'dogpile-guard' ? RedisLock : BaselineRedisLock;
      if (!Lock) throw new Error('dogpile-guard-baseline needs --baseline <dir>');
      const lock = new Lock(client, name, { ttl: TTL });
      return {
        acquire: async () => {
          await lock.acquire({ timeout: ACQUIRE_TIMEOUT });
        },
        release: async () => {
          await lock.release();
        },
      };
    }
    case 'redlock': {
      // Defaults (retryDelay 200 ms, retryJitter 100 ms, driftFactor 0.01) except retryCount,
      // raised from 10 so that no acquisition gives up.
      const redlock = new RedlockClass([client], { retryCount: 10_000 });
      let held: RedlockLock | undefined;
      return {
        acquire: async () => {
          held = await redlock.lock(name, TTL);
        },
        release: async () => {
          await held!.unlock();
          held = undefined;
        },
      };
    }
    case 'redis-semaphore': {
      // Defaults (retryInterval 10 ms, refresh every 0.8 × lockTimeout) except acquireTimeout.
      const mutex = new Mutex(client, name, { lockTimeout: TTL, acquireTimeout: ACQUIRE_TIMEOUT });
      return {
        acquire: () => mutex.acquire(),
        release: () => mutex.release(),
      };
    }
  }
}

let contenders: Contender[] = [];

async function prepare(lib: Lib, name: string): Promise<void> {
  await Promise.all(clients.map((c) => (c.status === 'ready' ? undefined : new Promise((resolve) => c.once('ready', resolve)))));
  contenders = clients.map((c) => contender(lib, c, name));
  for (const c of contenders) {
    await c.acquire();
    await c.release();
  }
}

async function run(perClient: number, holdMs: number): Promise<[number, number, number, string][]> {
  sent.clear();
  const records: [number, number, number, string][] = [];
  await Promise.all(
    contenders.map(async (c, i) => {
      for (let k = 0; k < perClient; k++) {
        const start = now();
        await c.acquire();
        const acquired = now();
        await sleep(holdMs);
        await c.release();
        records.push([start, acquired, now(), `${process.pid}/${i}`]);
      }
    }),
  );
  return records;
}

const rl = createInterface({ input: process.stdin });
let queue = Promise.resolve();
rl.on('line', (line) => {
  const command = JSON.parse(line) as { cmd: string; lib?: Lib; name?: string; perClient?: number; holdMs?: number };
  queue = queue
    .then(async () => {
      if (command.cmd === 'prepare') {
        await prepare(command.lib!, command.name!);
        send({ event: 'prepared' });
      } else if (command.cmd === 'run') {
        // How late timers and I/O callbacks ran: on a shared machine, mostly waiting for a CPU.
        const delay = monitorEventLoopDelay({ resolution: 1 });
        delay.enable();
        const records = await run(command.perClient!, command.holdMs!);
        delay.disable();
        send({ event: 'done', records, sent: Object.fromEntries(sent), loopDelayP99: delay.percentile(99) / 1e6, loopDelayMax: delay.max / 1e6 });
      } else if (command.cmd === 'exit') {
        rl.close();
        await Promise.all(clients.map((c) => c.quit()));
      }
    })
    .catch((err: unknown) => {
      send({ event: 'fatal', message: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
      process.exit(1);
    });
});

send({ event: 'started' });
