/**
 * Throwaway Redis servers for tests and benchmarks: started on free loopback ports with
 * nothing kept on disk, stopped when the test file (or the benchmark) ends. Never touches a server on the default port 6379.
 *
 * Every server's pid is written to the run directory created by `global-setup.ts`, whose
 * teardown kills whatever is left, so servers die with the run even when a test file crashes.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync, mkdirSync, readdirSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Redis, Cluster, RedisOptions, ClusterOptions } from 'ioredis';
import type { RedisClient } from '../src/redis/client.js';
import { closeLibraryClient, IoRedis, libraryClient } from './test-client.js';

const execFileAsync = promisify(execFile);
const HOST = '127.0.0.1';
const FORBIDDEN_PORT = 6379;

export const REDIS_MISSING_MESSAGE =
  'redis-server was not found on the PATH. The tests start their own throwaway Redis servers; ' +
  'install it with `sudo apt-get install -y redis-server` (Debian/Ubuntu) or `brew install redis` (macOS).';

function runDir(): string {
  const dir = process.env.DOGPILE_TEST_RUN_DIR ?? path.join(os.tmpdir(), 'dogpile-guard-tests');
  mkdirSync(path.join(dir, 'pids'), { recursive: true });
  return dir;
}

/** A free TCP port on 127.0.0.1 (never 6379). */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.unref();
      srv.on('error', reject);
      srv.listen(0, HOST, () => {
        const address = srv.address();
        srv.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    // Redis cluster uses port + 10000 for its bus; keep both below 65536.
    if (port !== FORBIDDEN_PORT && port > 0 && port < 55_000) return port;
  }
}

function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const socket = net.connect(port, HOST);
      socket.once('connect', () => {
        socket.destroy();
        resolve();
      });
      socket.once('error', () => {
        socket.destroy();
        if (performance.now() > deadline) reject(new Error(`redis-server on port ${port} did not start in ${timeoutMs} ms`));
        else setTimeout(attempt, 20);
      });
    };
    attempt();
  });
}

export interface StartRedisOptions {
  /** Extra `redis-server` arguments, e.g. `['--cluster-enabled', 'yes']`. */
  args?: string[];
  /** Fixed port; a free one is picked when omitted. */
  port?: number;
}

/**
 * One `redis-server` process owned by a test or a benchmark. It can be made before it is
 * started (`useRedis()` does so at a test file's top level): `port` and `url` are known once
 * `start()` has resolved, i.e. inside tests and later hooks.
 */
export class RedisServer {
  readonly host = HOST;
  private child: ChildProcess | undefined;
  private readonly clients = new Set<Redis>();
  private readonly libraryClients = new Set<RedisClient>();
  private dir: string | undefined;
  private assignedPort: number | undefined;
  private readonly extraArgs: string[];

  constructor(options: StartRedisOptions = {}) {
    if (options.port === FORBIDDEN_PORT) throw new Error('test servers never use port 6379');
    this.assignedPort = options.port;
    this.extraArgs = options.args ?? [];
  }

  get port(): number {
    if (this.assignedPort === undefined) throw new Error('this Redis server is not started yet: use it inside a test or a hook');
    return this.assignedPort;
  }

  get url(): string {
    return `redis://${HOST}:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the process (on a free port unless one was given; kept across `restart()`). */
  async start(): Promise<this> {
    if (this.running) return this;
    if (this.assignedPort !== undefined) {
      await this.launch(this.assignedPort);
      return this;
    }
    for (let attempt = 0; ; attempt++) {
      const port = await freePort();
      try {
        await this.launch(port);
        return this;
      } catch (err) {
        await this.kill().catch(() => {});
        if (attempt >= 3 || (err as Error).message === REDIS_MISSING_MESSAGE) throw err;
      }
    }
  }

  private async launch(port: number): Promise<void> {
    this.dir ??= mkdtempSync(path.join(runDir(), `redis-${port}-`));
    const args = [
      '--port', String(port),
      '--bind', HOST,
      '--save', '',
      '--appendonly', 'no',
      '--dir', this.dir,
      '--daemonize', 'no',
      '--loglevel', 'warning',
      '--enable-debug-command', 'yes',
      ...this.extraArgs,
    ];
    const child = spawn('redis-server', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    const spawned = new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (err: NodeJS.ErrnoException) =>
        reject(err.code === 'ENOENT' ? new Error(REDIS_MISSING_MESSAGE) : err),
      );
    });
    child.stderr?.resume();
    this.child = child;
    await spawned;
    writeFileSync(path.join(runDir(), 'pids', String(child.pid)), String(port));
    await waitForPort(port, 10_000);
    this.assignedPort = port;
  }

  /** A new ioredis client for this server, closed by `stop()`. */
  client(options: RedisOptions = {}): Redis {
    const client = new IoRedis.Redis({ host: HOST, port: this.port, lazyConnect: false, ...options });
    client.on('error', () => {
      /* connection errors are expected in fault tests */
    });
    this.clients.add(client);
    return client;
  }

  /**
   * A new client of the kind the tests hand to the library (`DOGPILE_TEST_CLIENT`: node-redis,
   * ioredis 5/6 or iovalkey; see test-client.ts), connected, closed by `stop()`.
   */
  async libraryClient(): Promise<RedisClient> {
    const client = await libraryClient(this.url);
    this.libraryClients.add(client);
    return client;
  }

  /** Blocks the whole server for `ms` (DEBUG SLEEP), from a separate connection. */
  async debugSleep(ms: number): Promise<void> {
    const c = new IoRedis.Redis({ host: HOST, port: this.port });
    try {
      await c.call('DEBUG', 'SLEEP', String(ms / 1000));
    } finally {
      c.disconnect();
    }
  }

  /** Starts DEBUG SLEEP without waiting for it to end; resolves when the server is asleep. */
  debugSleepInBackground(ms: number): Promise<void> {
    const c = new IoRedis.Redis({ host: HOST, port: this.port });
    c.on('error', () => {});
    const done = c.call('DEBUG', 'SLEEP', String(ms / 1000)).finally(() => c.disconnect());
    done.catch(() => {});
    return new Promise((resolve) => setTimeout(resolve, 20));
  }

  /** CLIENT PAUSE: the server stops serving client commands for `ms`. */
  async clientPause(ms: number, mode: 'ALL' | 'WRITE' = 'ALL'): Promise<void> {
    const c = new IoRedis.Redis({ host: HOST, port: this.port });
    try {
      await c.call('CLIENT', 'PAUSE', String(ms), mode);
    } finally {
      c.disconnect();
    }
  }

  /** SIGSTOP: the process freezes; connections stay open but nothing answers. */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  /** SIGCONT after `freeze()`. */
  thaw(): void {
    this.child?.kill('SIGCONT');
  }

  /** Stops the process (SIGKILL by default: a crash; SIGTERM: a clean shutdown). */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    if (signal !== 'SIGKILL') child.kill('SIGCONT');
    child.kill(signal);
    await exited;
    rmSync(path.join(runDir(), 'pids', String(child.pid)), { force: true });
  }

  /** Kill and start again on the same port (data is lost: nothing is saved). */
  async restart(downMs = 0): Promise<void> {
    await this.kill();
    if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
    await this.start();
  }

  /** Closes this server's clients and stops it. */
  async stop(): Promise<void> {
    for (const c of this.clients) c.disconnect();
    this.clients.clear();
    for (const c of this.libraryClients) await closeLibraryClient(c);
    this.libraryClients.clear();
    await this.kill();
    if (this.dir !== undefined) rmSync(this.dir, { recursive: true, force: true });
  }

  /** Runs a command on a short-lived connection (for inspection from tests). */
  async command(...args: (string | number)[]): Promise<unknown> {
    const c = new IoRedis.Redis({ host: HOST, port: this.port });
    try {
      return await c.call(String(args[0]), ...args.slice(1).map(String));
    } finally {
      c.disconnect();
    }
  }
}

/** Starts one throwaway server on a free port. */
export function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  return new RedisServer(options).start();
}

/**
 * A Redis Cluster of `masters` masters (no replicas) on free ports. Like `RedisServer`, it can
 * be made before it is started (`useRedisCluster()`); `nodes` and `client()` work once started.
 */
export class RedisTestCluster {
  readonly nodes: RedisServer[] = [];
  private readonly clients = new Set<Cluster>();

  constructor(readonly masters = 3) {
    if (masters < 3) throw new Error('a Redis Cluster needs at least 3 masters');
  }

  get startupNodes(): { host: string; port: number }[] {
    return this.nodes.map((n) => ({ host: n.host, port: n.port }));
  }

  client(options: ClusterOptions = {}): Cluster {
    const c = new IoRedis.Cluster(this.startupNodes, options);
    c.on('error', () => {});
    this.clients.add(c);
    return c;
  }

  async start(): Promise<this> {
    try {
      for (let i = 0; i < this.masters; i++) {
        this.nodes.push(
          await startRedis({
            args: ['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${i}.conf`, '--cluster-node-timeout', '2000'],
          }),
        );
      }
      await execFileAsync('redis-cli', [
        '--cluster', 'create',
        ...this.nodes.map((n) => `${n.host}:${n.port}`),
        '--cluster-replicas', '0',
        '--cluster-yes',
      ]);
      const deadline = performance.now() + 15_000;
      for (const node of this.nodes) {
        for (;;) {
          const info = String(await node.command('CLUSTER', 'INFO'));
          if (info.includes('cluster_state:ok')) break;
          if (performance.now() > deadline) throw new Error(`cluster did not reach state ok:\n${info}`);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      return this;
    } catch (err) {
      await this.stop().catch(() => {});
      throw err;
    }
  }

  async stop(): Promise<void> {
    for (const c of this.clients) c.disconnect();
    this.clients.clear();
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}

export function startRedisCluster(masters = 3): Promise<RedisTestCluster> {
  return new RedisTestCluster(masters).start();
}

/** Kills every server recorded in the run directory (used by the global teardown). */
export function killRecordedServers(dir: string): number {
  let killed = 0;
  const pidsDir = path.join(dir, 'pids');
  let entries: string[] = [];
  try {
    entries = readdirSync(pidsDir);
  } catch {
    return 0;
  }
  for (const pid of entries) {
    try {
      process.kill(Number(pid), 'SIGKILL');
      killed++;
    } catch {
      /* already gone */
    }
  }
  return killed;
}
