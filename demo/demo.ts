/**
 * `npm run demo`: the cache stampede and its fix, measured on this machine.
 *
 * 1. In one process (always; needs nothing but `npm install`): an Express server with a slow
 *    endpoint — a fake 200 ms database query from a pool of 10 connections — and a herd of
 *    concurrent requests for one uncached report, first without protection, then behind
 *    `dogpileGuard()`, then once more while the report is cached.
 * 2. Across processes (with `REDIS_URL` or `--redis URL`): several worker processes, the herd
 *    spread over them, comparing the in-process default (one query per process) with a cache
 *    shared through Redis (one query in all).
 *
 *   npm run demo
 *   npm run demo -- --herd 500
 *   REDIS_URL=redis://127.0.0.1:6379 npm run demo -- --workers 4
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http, { type Server } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { getDefaultCache } from 'dogpile-guard';
import { createDemoApp, type RouteName } from './app.js';
import { FakeDatabase } from './fake-db.js';
import { bold, dim, green, ms, Progress, red, seconds, table, type Row } from './format.js';
import { fireHerd, percentile, type HerdResult, type Target } from './herd.js';
import { SETTINGS_ENV, type DemoMessage, type WorkerMessage, type WorkerSettings } from './messages.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');

const USAGE = `Usage: npm run demo -- [options]

  --herd N       concurrent requests per herd (default 200; 50 with --quick)
  --workers N    worker processes sharing Redis (default 4; 2 with --quick)
  --redis URL    also run the multi-process demo on this Redis (default: $REDIS_URL)
  --db-ms N      duration of one fake database query in ms (default 200)
  --db-pool N    database connections per process, 0 = unlimited (default 10)
  --quick        smaller defaults, for a fast run
  -h, --help     this text`;

interface Settings {
  herd: number;
  workers: number;
  redisUrl: string | undefined;
  dbMs: number;
  dbPool: number;
}

class UsageError extends Error {}

function parseSettings(argv: string[]): Settings | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      herd: { type: 'string' },
      workers: { type: 'string' },
      redis: { type: 'string' },
      'db-ms': { type: 'string' },
      'db-pool': { type: 'string' },
      quick: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) return undefined;
  const int = (name: string, raw: string | undefined, fallback: number, min: number, max: number): number => {
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`--${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}`);
    return n;
  };
  const redisUrl = values.redis ?? (process.env.REDIS_URL || undefined);
  if (redisUrl !== undefined && !/^rediss?:\/\//.test(redisUrl)) throw new UsageError(`the Redis URL must start with redis:// or rediss://, got ${JSON.stringify(redisUrl)}`);
  return {
    herd: int('herd', values.herd, values.quick ? 50 : 200, 2, 20_000),
    workers: int('workers', values.workers, values.quick ? 2 : 4, 2, 32),
    redisUrl,
    dbMs: int('db-ms', values['db-ms'], 200, 1, 10_000),
    dbPool: int('db-pool', values['db-pool'], 10, 0, 10_000),
  };
}

/** What must be stopped if the demo is interrupted. */
const cleanups = new Set<() => void>();

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const freshRun = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;
/** The host name the herd asks for in the multi-process demo, as it would through a load balancer. */
const PUBLIC_HOST = 'reports.example.test';
const redact = (url: string) => url.replace(/\/\/[^@/]*@/, '//***@');

interface Phase {
  herd: HerdResult;
  queries: number;
}

async function runHerd(label: string, targets: Target[], count: number, agent: http.Agent): Promise<HerdResult> {
  const progress = new Progress(label, count);
  const herd = await fireHerd({ targets, count, agent, onProgress: (done) => progress.update(done) });
  const failed = herd.failed > 0 ? red(`, ${herd.failed} failed (${herd.errors.join('; ')})`) : '';
  progress.finish(`${herd.ok}/${herd.sent} answered in ${seconds(herd.wallMs)}${failed}`);
  return herd;
}

/** The rows every comparison shares: origin calls, answers, latency, X-Cache outcomes. */
function comparisonRows(phases: Phase[], best: number): (Row | null)[] {
  const cell = (f: (p: Phase) => string) => phases.map(f);
  const x = (name: string) => cell((p) => (p.herd.xCache.none === p.herd.ok ? '—' : String(p.herd.xCache[name] ?? 0)));
  return [
    { label: 'origin (DB) calls', cells: cell((p) => String(p.queries)), color: { [best]: green } },
    { label: 'requests answered', cells: cell((p) => `${p.herd.ok}/${p.herd.sent}`) },
    null,
    { label: 'latency p50', cells: cell((p) => ms(percentile(p.herd.latencies, 50))) },
    { label: 'latency p99', cells: cell((p) => ms(percentile(p.herd.latencies, 99))) },
    { label: 'latency max', cells: cell((p) => ms(percentile(p.herd.latencies, 100))) },
    null,
    { label: 'X-Cache: MISS', cells: x('MISS') },
    { label: 'X-Cache: COALESCED', cells: x('COALESCED') },
    { label: 'X-Cache: HIT', cells: x('HIT') },
  ];
}

function listen(app: http.RequestListener): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = http.createServer(app);
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

function describeDb(s: Settings): string {
  const pool = s.dbPool === 0 ? 'no connection limit' : `a pool of ${plural(s.dbPool, 'connection')}`;
  return `a fake database query, ${s.dbMs} ms each, ${pool}`;
}

async function singleProcess(s: Settings): Promise<boolean> {
  console.log(bold(`\nOne process: ${s.herd} concurrent requests for one uncached report`));
  const db = new FakeDatabase(s.dbMs, s.dbPool);
  const server = await listen(createDemoApp(db));
  const agent = new http.Agent({ keepAlive: true });
  const stop = () => {
    agent.destroy();
    server.closeAllConnections();
    server.close();
  };
  cleanups.add(stop);
  try {
    const { port } = server.address() as { port: number };
    console.log(dim(`  Express on http://127.0.0.1:${port}; GET /report runs ${describeDb(s)}\n`));

    const none = await runHerd('[1/3] no protection            ', [{ port, path: `/none/report?run=${freshRun('none')}` }], s.herd, agent);
    const guarded = `/local/report?run=${freshRun('local')}`;
    const cold = await runHerd('[2/3] dogpileGuard(), cold key ', [{ port, path: guarded }], s.herd, agent);
    const coldQueries = db.queries('local');
    const warm = await runHerd('[3/3] dogpileGuard(), cached   ', [{ port, path: guarded }], s.herd, agent);

    const phases: Phase[] = [
      { herd: none, queries: db.queries('none') },
      { herd: cold, queries: coldQueries },
      { herd: warm, queries: db.queries('local') - coldQueries },
    ];
    console.log();
    console.log(table([['no protection'], ['dogpileGuard()', 'cold key'], ['dogpileGuard()', 'cached']], comparisonRows(phases, 1)));
    console.log();
    console.log(dim('  no protection:  app.get(\'/report\', handler)'));
    console.log(dim('  dogpileGuard(): app.get(\'/report\', dogpileGuard({ ttl: \'30s\' }), handler)'));
    console.log(dim('  latency: from sending a request to its last byte, measured by a client in this same process'));
    console.log();
    const [p0, p1, p2] = phases as [Phase, Phase, Phase];
    console.log(`  Without protection the database ran ${plural(p0.queries, 'query', 'queries')} for the same report, and the slowest request took ${ms(percentile(none.latencies, 100))}.`);
    console.log(
      `  With dogpileGuard() it ran ${green(plural(p1.queries, 'query', 'queries'))}: one request computed the report, ` +
        `${cold.xCache.COALESCED ?? 0} waited for it and got its response (COALESCED)` +
        `${cold.xCache.HIT ? `, ${cold.xCache.HIT} arrived after it was stored (HIT)` : ''}; ` +
        `the next herd was answered from the cache (${plural(p2.queries, 'query', 'queries')}).`,
    );
    return none.failed + cold.failed + warm.failed === 0;
  } finally {
    cleanups.delete(stop);
    agent.destroy();
    await closeServer(server);
    await getDefaultCache().close();
  }
}

interface RunningWorker {
  child: ChildProcess;
  port: number;
  pid: number;
  exited: Promise<void>;
}

function startWorker(settings: WorkerSettings): Promise<RunningWorker> {
  const child = fork(path.join(here, 'worker.ts'), [], {
    cwd: root,
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, [SETTINGS_ENV]: JSON.stringify(settings) },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = () => child.kill('SIGKILL');
  cleanups.add(kill);
  void exited.then(() => cleanups.delete(kill));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker ${child.pid} did not start in 30 s`)), 30_000);
    const onMessage = (message: WorkerMessage) => {
      if (message.type === 'ready') {
        clearTimeout(timer);
        child.off('message', onMessage);
        resolve({ child, port: message.port, pid: message.pid, exited });
      } else if (message.type === 'failed') {
        clearTimeout(timer);
        reject(new Error(`worker ${child.pid}: ${message.message}`));
      }
    };
    child.on('message', onMessage);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`worker ${child.pid} exited before it was ready`));
    });
  });
}

function askQueries(worker: RunningWorker): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: WorkerMessage) => {
      if (message.type !== 'queries') return;
      worker.child.off('message', onMessage);
      resolve(message.queries);
    };
    worker.child.on('message', onMessage);
    worker.child.send({ type: 'queries' } satisfies DemoMessage, (error) => error && reject(error));
  });
}

async function stopWorkers(workers: RunningWorker[]): Promise<void> {
  await Promise.all(
    workers.map(async (w) => {
      if (w.child.connected) w.child.send({ type: 'close' } satisfies DemoMessage);
      const timer = setTimeout(() => w.child.kill('SIGKILL'), 10_000);
      await w.exited;
      clearTimeout(timer);
    }),
  );
}

/** Connects once to check the URL, so a wrong one fails fast with a clear message. */
async function connectRedis(url: string): Promise<Redis> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 3000, retryStrategy: () => null });
  let cause: Error | undefined;
  client.on('error', (error: Error) => {
    cause ??= error;
  });
  try {
    await client.connect();
    await client.ping();
    return client;
  } catch (error) {
    client.disconnect();
    throw new Error(`cannot reach Redis at ${redact(url)}: ${(cause ?? (error as Error)).message}`);
  }
}

/** Deletes what this run left in Redis (values expire by themselves after 30 s anyway). */
async function deleteKeys(client: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    if (keys.length > 0) await client.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

async function multiProcess(s: Settings, redisUrl: string, client: Redis): Promise<boolean> {
  console.log(bold(`\n${s.workers} worker processes sharing Redis (${redact(redisUrl)}): ${s.herd} requests spread over them`));
  const prefix = `dogpile-demo:${process.pid}-${randomBytes(4).toString('hex')}`;
  const agent = new http.Agent({ keepAlive: true });
  const destroyAgent = () => agent.destroy();
  cleanups.add(destroyAgent);
  let workers: RunningWorker[] = [];
  try {
    const starting = new Progress(`starting ${plural(s.workers, 'worker process', 'worker processes')}`, s.workers);
    let ready = 0;
    const started = await Promise.allSettled(
      Array.from({ length: s.workers }, () =>
        startWorker({ redisUrl, prefix, dbMs: s.dbMs, dbPool: s.dbPool }).then((w) => {
          starting.update(++ready);
          return w;
        }),
      ),
    );
    workers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failure = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failure) throw failure.reason;
    starting.finish(`ready (pids ${workers.map((w) => w.pid).join(', ')})`);
    console.log(dim(`  each runs the demo's Express app on its own port; GET /report runs ${describeDb(s)}`));
    console.log(dim(`  requests go round-robin to the workers with Host: ${PUBLIC_HOST}, as through a load balancer\n`));

    const targets = (route: RouteName) => {
      const run = freshRun(route);
      return workers.map((w) => ({ port: w.port, path: `/${route}/report?run=${run}`, host: PUBLIC_HOST }));
    };
    const none = await runHerd('[1/3] no protection                    ', targets('none'), s.herd, agent);
    const local = await runHerd('[2/3] in-process only (embedded cache) ', targets('local'), s.herd, agent);
    const shared = await runHerd('[3/3] shared through Redis             ', targets('shared'), s.herd, agent);

    const perWorker = await Promise.all(workers.map(askQueries));
    const total = (route: RouteName) => perWorker.reduce((sum, q) => sum + (q[route] ?? 0), 0);
    const split = (route: RouteName) => perWorker.map((q) => q[route] ?? 0).join(' + ');
    const phases: Phase[] = [
      { herd: none, queries: total('none') },
      { herd: local, queries: total('local') },
      { herd: shared, queries: total('shared') },
    ];
    const rows = comparisonRows(phases, 2);
    rows.splice(1, 0, { label: '  per worker', cells: [split('none'), split('local'), split('shared')], color: { 2: green } });
    console.log();
    console.log(table([['no protection'], ['in-process only', 'dogpileGuard()'], ['shared Redis', 'dogpileGuard({ cache })']], rows));
    console.log();
    console.log(dim('  in-process only: dogpileGuard() on the embedded default cache of each worker'));
    console.log(dim('  shared Redis:    dogpileGuard({ cache: createCache({ redis }) }), one Redis for every worker'));
    console.log();
    const [, p1, p2] = phases as [Phase, Phase, Phase];
    console.log(`  In-process protection stops the herd inside each process: ${plural(p1.queries, 'query', 'queries')}, one per worker.`);
    console.log(`  With the cache shared through Redis the workers coordinate: ${green(plural(p2.queries, 'query', 'queries'))} across ${s.workers === 2 ? "both workers" : `all ${s.workers} workers`}.`);
    return none.failed + local.failed + shared.failed === 0;
  } finally {
    cleanups.delete(destroyAgent);
    agent.destroy();
    await stopWorkers(workers);
    await deleteKeys(client, prefix).catch(() => {});
  }
}

async function main(): Promise<number> {
  let s: Settings | undefined;
  try {
    s = parseSettings(process.argv.slice(2));
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (s === undefined) {
    console.log(USAGE);
    return 0;
  }
  console.log(bold('dogpile-guard demo: a cache stampede, without and with protection'));
  if (s.redisUrl === undefined) console.log(dim('(set REDIS_URL or pass --redis URL to also see several processes share one Redis)'));
  // A wrong Redis URL fails here, before anything runs.
  const client = s.redisUrl === undefined ? undefined : await connectRedis(s.redisUrl);
  let ok: boolean;
  try {
    ok = await singleProcess(s);
    if (client) ok = (await multiProcess(s, s.redisUrl!, client)) && ok;
  } finally {
    await client?.quit().catch(() => client.disconnect());
  }
  console.log();
  if (!ok) console.error(red('Some requests failed; see above.'));
  return ok ? 0 : 1;
}

process.once('SIGINT', () => {
  for (const cleanup of cleanups) cleanup();
  process.exit(130);
});

try {
  process.exitCode = await main();
} catch (error) {
  console.error(red(`\ndemo failed: ${(error as Error).message}`));
  process.exitCode = 1;
}
