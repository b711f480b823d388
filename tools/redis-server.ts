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

export interface ClusterSetup {
  /** Replicas per master (`redis-cli --cluster create --cluster-replicas`). @default 0 */
  replicas?: number;
  /** `cluster-node-timeout` in ms: how soon a dead master is failed over. @default 2000 */
  nodeTimeoutMs?: number;
  /** Extra `redis-server` arguments for every node. */
  args?: string[];
}

/**
 * A Redis Cluster of `masters` masters (and `replicas` replicas each) on free ports. Like
 * `RedisServer`, it can be made before it is started (`useRedisCluster()`); `nodes` and
 * `client()` work once started.
 */
export class RedisTestCluster {
  readonly nodes: RedisServer[] = [];
  private readonly clients = new Set<Cluster>();

  constructor(
    readonly masters = 3,
    private readonly setup: ClusterSetup = {},
  ) {
    if (masters < 3) throw new Error('a Redis Cluster needs at least 3 masters');
  }

  /** The node serving `port`. */
  nodeAt(port: number): RedisServer {
    const node = this.nodes.find((n) => n.port === port);
    if (!node) throw new Error(`no node of this cluster listens on ${port}`);
    return node;
  }

  /** The node that is master of `slot` right now, as the first node still answering sees it. */
  async masterOf(slot: number): Promise<RedisServer> {
    for (const node of this.nodes) {
      if (!node.running) continue;
      try {
        const slots = (await node.command('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
        for (const [from, to, master] of slots) if (slot >= from && slot <= to) return this.nodeAt(Number(master[1]));
      } catch {
        /* try the next node */
      }
    }
    throw new Error(`no node knows the master of slot ${slot}`);
  }

  /** Waits until every running node reports cluster_state:ok (after a failover). */
  async waitHealthy(timeoutMs = 20_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (const node of this.nodes) {
      if (!node.running) continue;
      for (;;) {
        const info = String(await node.command('CLUSTER', 'INFO').catch(() => ''));
        if (info.includes('cluster_state:ok')) break;
        if (performance.now() > deadline) throw new Error(`cluster did not reach state ok:\n${info}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
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
      const replicas = this.setup.replicas ?? 0;
      for (let i = 0; i < this.masters * (1 + replicas); i++) {
        this.nodes.push(
          await startRedis({
            args: [
              '--cluster-enabled', 'yes',
              '--cluster-config-file', `nodes-${i}.conf`,
              '--cluster-node-timeout', String(this.setup.nodeTimeoutMs ?? 2000),
              ...(this.setup.args ?? []),
            ],
          }),
        );
      }
      await execFileAsync('redis-cli', [
        '--cluster', 'create',
        ...this.nodes.map((n) => `${n.host}:${n.port}`),
        '--cluster-replicas', String(replicas),
        '--cluster-yes',
      ]);
      await this.waitHealthy(15_000);
      if (replicas > 0) await this.waitReplicasLinked(15_000);
      return this;
    } catch (err) {
      await this.stop().catch(() => {});
      throw err;
    }
  }

  /** Waits until every master has its replicas attached and in sync (master_link_status:up). */
  private async waitReplicasLinked(timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (const node of this.nodes) {
      for (;;) {
        const info = String(await node.command('INFO', 'replication'));
        if (info.includes('role:master') || info.includes('master_link_status:up')) break;
        if (performance.now() > deadline) throw new Error(`replica did not sync:\n${info}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  async stop(): Promise<void> {
    for (const c of this.clients) c.disconnect();
    this.clients.clear();
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}

export function startRedisCluster(masters = 3, setup: ClusterSetup = {}): Promise<RedisTestCluster> {
  return new RedisTestCluster(masters, setup).start();
}

/**
 * Redis Sentinel: a master, one replica and 3 sentinels (`redis-server <conf> --sentinel`),
 * all on free loopback ports, watching the master as `name` with a quorum of 2; a master
 * that stops answering for `downAfterMs` is failed over to the replica.
 */
export class RedisSentinelSetup {
  readonly master = new RedisServer();
  readonly replica = new RedisServer();
  readonly sentinelPorts: number[] = [];
  private readonly sentinels: ChildProcess[] = [];
  private readonly clients = new Set<Redis>();
  private dir: string | undefined;

  constructor(
    readonly name = 'mymaster',
    private readonly downAfterMs = 1000,
  ) {}

  get sentinelAddresses(): { host: string; port: number }[] {
    return this.sentinelPorts.map((port) => ({ host: HOST, port }));
  }

  /** An ioredis client that finds the master through the sentinels; closed by `stop()`. */
  client(options: RedisOptions = {}): Redis {
    const client = new IoRedis.Redis({ sentinels: this.sentinelAddresses, name: this.name, ...options });
    client.on('error', () => {});
    this.clients.add(client);
    return client;
  }

  async start(): Promise<this> {
    try {
      await this.master.start();
      await this.replica.start();
      await this.replica.command('REPLICAOF', HOST, this.master.port);
      await waitFor(async () => String(await this.replica.command('INFO', 'replication')).includes('master_link_status:up'), 15_000, 'the replica did not sync');
      this.dir = mkdtempSync(path.join(runDir(), 'sentinels-'));
      for (let i = 0; i < 3; i++) await this.startSentinel(i);
      // Every sentinel knows the replica and the other sentinels: a failover can be agreed on.
      for (const port of this.sentinelPorts) {
        await waitFor(
          async () => {
            const c = new IoRedis.Redis({ host: HOST, port });
            try {
              const replicas = (await c.call('SENTINEL', 'REPLICAS', this.name)) as unknown[];
              const sentinels = (await c.call('SENTINEL', 'SENTINELS', this.name)) as unknown[];
              return replicas.length === 1 && sentinels.length === 2;
            } finally {
              c.disconnect();
            }
          },
          30_000,
          'the sentinels did not discover each other',
        );
      }
      return this;
    } catch (err) {
      await this.stop().catch(() => {});
      throw err;
    }
  }

  /** The address the sentinels give for the master now. */
  async masterPort(): Promise<number> {
    const c = new IoRedis.Redis({ host: HOST, port: this.sentinelPorts[0]! });
    try {
      const [, port] = (await c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.name)) as [string, string];
      return Number(port);
    } finally {
      c.disconnect();
    }
  }

  /** The server that is master now (the original master or the replica). */
  async currentMaster(): Promise<RedisServer> {
    const port = await this.masterPort();
    return port === this.master.port ? this.master : this.replica;
  }

  private async startSentinel(i: number): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const port = await freePort();
      const conf = path.join(this.dir!, `sentinel-${i}.conf`);
      writeFileSync(
        conf,
        [
          `port ${port}`,
          `bind ${HOST}`,
          `dir ${this.dir!}`,
          `sentinel monitor ${this.name} ${HOST} ${this.master.port} 2`,
          `sentinel down-after-milliseconds ${this.name} ${this.downAfterMs}`,
          `sentinel failover-timeout ${this.name} 10000`,
          `sentinel parallel-syncs ${this.name} 1`,
          '',
        ].join('\n'),
      );
      const child = spawn('redis-server', [conf, '--sentinel'], { stdio: ['ignore', 'ignore', 'pipe'] });
      child.stderr?.resume();
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
      writeFileSync(path.join(runDir(), 'pids', String(child.pid)), String(port));
      this.sentinels.push(child);
      try {
        await waitForPort(port, 10_000);
        this.sentinelPorts.push(port);
        return;
      } catch (err) {
        child.kill('SIGKILL');
        if (attempt >= 3) throw err;
      }
    }
  }

  async stop(): Promise<void> {
    for (const c of this.clients) c.disconnect();
    this.clients.clear();
    await Promise.all(
      this.sentinels.map(async (child) => {
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
          child.kill('SIGKILL');
          await exited;
        }
        rmSync(path.join(runDir(), 'pids', String(child.pid)), { force: true });
      }),
    );
    await this.master.stop();
    await this.replica.stop();
    if (this.dir !== undefined) rmSync(this.dir, { recursive: true, force: true });
  }
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, message: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (performance.now() > deadline) throw new Error(`${message} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
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
