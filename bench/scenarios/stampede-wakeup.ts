/**
 * Fleet scenario of the cold-key stampede benchmark (`bench/stampede-wakeup.bench.ts`), driven
 * by its commands (its stampedes start on a Redis message, not on the fleet's clock).
 * Config: `{ url }`.
 *
 * It holds one `createCache({ redis: client })` on its own ioredis connection, a plain ioredis
 * connection for the loader's run counter and the raw PUBLISH, and a plain ioredis subscriber on
 * `CONTROL_CHANNEL` (the trigger of a stampede) and `RAW_CHANNEL` (the reference delivery).
 * Commands (tools/fleet/member.ts):
 *
 * - `arm { round, key, runsKey }` → `armed`: the next trigger message naming `round` starts the
 *   stampede of `key`: `CALLERS` calls of `getOrCompute(key, loader, TTL_MS)` in one loop, no
 *   await between them. The loader counts its run (`INCR runsKey` on the plain connection),
 *   waits `LOADER_MS` and returns a small object. Once every call resolved: `stampede { round,
 *   trigger, firstCall, loopEnd, firstCommand, firstCommandName, commands, commandTimes, resolved, loads }`.
 * - `raw-arm { round }` → `raw-armed`: `CALLERS` promises wait for the next message on
 *   `RAW_CHANNEL`, all resolved by one listener; once they are: `raw { round, resolved }`.
 * - `publish { round }`: a raw PUBLISH of a ~100-byte payload on `RAW_CHANNEL` from the plain
 *   connection; `published { sent, reply }` (`sent`: the moment before the PUBLISH was sent).
 *
 * Every time is `process.hrtime.bigint()` in ns as a number: CLOCK_MONOTONIC on Linux, one
 * clock for every process of the machine, so times taken in different processes compare.
 * `resolved` holds, per caller, when its promise resolved (its `then` ran); `loads`, the moment
 * each loader run of this process returned its value to the library. `firstCommand` is when
 * the library handed its first command after the trigger to the cache's client (its
 * `sendCommand`, wrapped here to take that time: a measurement shim of this process only), and
 * `commands` how many it handed over until every call resolved, `commandTimes` when each was.
 */
import { Redis } from 'ioredis';
import { sleep } from '../../tools/basics.js';
import { fail, memberConfig, runMember, send } from '../../tools/fleet/member.js';
import { createCache } from '../../src/index.js';

const { url } = memberConfig<{ url: string }>();

const CONTROL_CHANNEL = 'bench:stampede:go';
const RAW_CHANNEL = 'bench:stampede:raw';
/** Callers per process per stampede, and promises per process waiting for the raw message. */
const CALLERS = 500;
const LOADER_MS = 50;
const TTL_MS = 60_000;
/** The raw message: about the size of the library's announcement of a small value. */
const RAW_PAYLOAD = JSON.stringify({ kind: 'ok', value: { id: 1, name: 'x'.repeat(40) }, pad: 'y'.repeat(20) });

const nowNs = () => Number(process.hrtime.bigint());

function connect(): Redis {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => {
    /* surfaced through the failing calls */
  });
  return client;
}

// --- the cache under measurement, and the shim that sees its commands leave -----------------

const client = connect();
/** Set on the trigger: the library's commands are timed and counted until the round ends. */
let watching = false;
let firstCommand: number | undefined;
let firstCommandName: string | undefined;
let commands = 0;
/** When each of those commands was handed over. */
let commandTimes: number[] = [];
const sendCommand = client.sendCommand.bind(client);
client.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
  if (watching) {
    if (firstCommand === undefined) {
      firstCommand = nowNs();
      firstCommandName = args[0].name;
    }
    commands++;
    commandTimes.push(nowNs());
  }
  return sendCommand(...args);
}) as Redis['sendCommand'];
/** When the library's subscriber connection (a duplicate of `client`) received each message of the round. */
let arrivals: number[] = [];
const duplicate = client.duplicate.bind(client);
client.duplicate = ((...args: Parameters<Redis['duplicate']>) => {
  const connection = duplicate(...args);
  connection.prependListener('messageBuffer', () => {
    if (watching) arrivals.push(nowNs());
  });
  return connection;
}) as Redis['duplicate'];
const cache = createCache({ redis: client });

/** Plain connections: the run counter and the raw PUBLISH; the subscriber of both channels. */
const side = connect();
const subscriber = connect();

// --- the stampede -----------------------------------------------------------------------------

interface Armed {
  round: number;
  key: string;
  runsKey: string;
}
let armed: Armed | undefined;

function loaderOf(runsKey: string, loads: number[]): () => Promise<{ round: string; pid: number }> {
  return async () => {
    const counted = side.incr(runsKey);
    await sleep(LOADER_MS);
    await counted;
    const value = { round: runsKey, pid: process.pid };
    loads.push(nowNs());
    return value;
  };
}

function stampede(a: Armed, trigger: number): void {
  const resolved = new Array<number>(CALLERS).fill(0);
  const loads: number[] = [];
  const loader = loaderOf(a.runsKey, loads);
  const calls: Promise<void>[] = [];
  firstCommand = undefined;
  firstCommandName = undefined;
  commands = 0;
  commandTimes = [];
  arrivals = [];
  watching = true;
  const firstCall = nowNs();
  for (let i = 0; i < CALLERS; i++) {
    calls.push(
      cache.getOrCompute(a.key, loader, TTL_MS).then(() => {
        resolved[i] = nowNs();
      }),
    );
  }
  const loopEnd = nowNs();
  Promise.all(calls).then(() => {
    watching = false;
    send({ event: 'stampede', round: a.round, trigger, firstCall, loopEnd, firstCommand, firstCommandName, commands, commandTimes, arrivals, resolved, loads });
  }, fail);
}

// --- the raw reference ------------------------------------------------------------------------

/** The resolvers of the promises waiting for the next raw message. */
let rawWaiting: ((payload: unknown) => void)[] = [];
let rawArrival = 0;

function rawArm(round: number): { event: string; round: number } {
  const resolved = new Array<number>(CALLERS).fill(0);
  const waits: Promise<void>[] = [];
  const resolvers: ((payload: unknown) => void)[] = [];
  for (let i = 0; i < CALLERS; i++) {
    waits.push(
      new Promise<unknown>((resolve) => resolvers.push(resolve)).then(() => {
        resolved[i] = nowNs();
      }),
    );
  }
  rawWaiting = resolvers;
  Promise.all(waits).then(() => send({ event: 'raw', round, resolved, arrival: rawArrival }), fail);
  return { event: 'raw-armed', round };
}

async function publish(round: number): Promise<{ event: string } & Record<string, unknown>> {
  const sent = nowNs();
  await side.publish(RAW_CHANNEL, RAW_PAYLOAD);
  const reply = nowNs();
  return { event: 'published', round, sent, reply };
}

subscriber.on('messageBuffer', (channel: Buffer, message: Buffer) => {
  const at = nowNs();
  const name = channel.toString();
  if (name === CONTROL_CHANNEL) {
    const round = Number(message.toString());
    const a = armed;
    if (!a || a.round !== round) fail(new Error(`trigger of round ${round} arrived, armed for ${a?.round ?? 'none'}`));
    armed = undefined;
    stampede(a, at);
  } else if (name === RAW_CHANNEL) {
    // One listener wakes every waiting promise with the parsed message, as the library's
    // subscriber wakes the waiters of a key.
    rawArrival = at;
    const payload = JSON.parse(message.toString()) as unknown;
    const waiting = rawWaiting;
    rawWaiting = [];
    for (const resolve of waiting) resolve(payload);
  }
});

// --- the fleet member ------------------------------------------------------------------

runMember({
  async start() {
    await subscriber.subscribe(CONTROL_CHANNEL, RAW_CHANNEL);
    await side.ping();
    await cache.getOrCompute(`bench:stampede:warmup:${process.pid}`, () => ({ pid: process.pid }), TTL_MS);
    return {
      commands: {
        arm: async (msg) => {
          armed = { round: msg.round as number, key: msg.key as string, runsKey: msg.runsKey as string };
          return { event: 'armed', round: msg.round };
        },
        'raw-arm': async (msg) => rawArm(msg.round as number),
        publish: (msg) => publish(msg.round as number),
      },
      async close() {
        await cache.close().catch(() => {});
        for (const c of [client, side, subscriber]) await c.quit().catch(() => {});
      },
    };
  },
});
