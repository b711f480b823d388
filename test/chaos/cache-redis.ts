/**
 * The cache's Redis of a history, which the nemesis attacks: one throwaway server, or a Redis
 * Cluster of 3 masters with one replica each and a short `cluster-node-timeout`, so that a
 * killed master's replica is promoted within a second or two. Each fault is one method here;
 * on a cluster, a fault on "the server" hits the master of one shard (a slot range, numbered
 * 0-2), found when the fault begins, so it follows earlier failovers.
 *
 * Every wait is bounded: a fault whose aftermath does not settle in time is recorded as it
 * went (no `promoted`, `rejoined: false`) rather than waited on for ever.
 */
import { sleep } from '../../tools/basics.js';
import { RedisServer, RedisTestCluster } from '../../tools/redis-server.js';
import { CLUSTER_MASTERS } from './config.js';
import type { Fault, Topology } from './history.js';

/** cluster-node-timeout of the cache's cluster: a master silent this long is failed over. */
export const CLUSTER_NODE_TIMEOUT_MS = 1000;

/** The longest the nemesis waits for a promotion, a healthy cluster, or a node back in sync. */
const SETTLE_MS = 15_000;

/** How the workers reach the cache's Redis. */
export type CacheAddress = { url: string } | { nodes: { host: string; port: number }[] };

/** What a Redis fault adds to its record (cluster faults: which nodes took part). */
export type FaultDetail = Pick<Fault, 'shard' | 'master' | 'promoted' | 'rejoined'>;

export interface CacheRedis {
  readonly topology: Topology;
  start(): Promise<void>;
  address(): CacheAddress;
  /** CLIENT PAUSE ALL for `ms` (on a cluster: the shard's master); resolves when it has passed. */
  pause(ms: number, shard: number): Promise<FaultDetail>;
  /** CLIENT KILL TYPE pubsub (on a cluster: on every node). */
  killSubscribers(): Promise<void>;
  /** SIGSTOP for `ms`, then SIGCONT (on a cluster: the shard's master, and the cluster settles after). */
  freeze(ms: number, shard: number): Promise<FaultDetail>;
  /** Single server: killed and started again empty after `downMs`. */
  restart(downMs: number): Promise<void>;
  /** Cluster: CLUSTER FAILOVER sent to the shard master's replica; resolves once it is master and the cluster is ok. */
  failover(shard: number): Promise<FaultDetail>;
  /** Cluster: SIGKILL of the shard's master; resolves once its replica is promoted and the killed node is back as a replica. */
  killMaster(shard: number): Promise<FaultDetail>;
  stop(): Promise<void>;
}

export function cacheRedis(topology: Topology): CacheRedis {
  return topology === 'cluster' ? new ClusterRedis() : new SingleRedis();
}

class SingleRedis implements CacheRedis {
  readonly topology = 'single';
  private readonly server = new RedisServer();

  async start(): Promise<void> {
    await this.server.start();
  }

  address(): CacheAddress {
    return { url: this.server.url };
  }

  async pause(ms: number): Promise<FaultDetail> {
    await this.server.clientPause(ms, 'ALL').catch(() => {});
    await sleep(ms);
    return {};
  }

  async killSubscribers(): Promise<void> {
    await this.server.command('CLIENT', 'KILL', 'TYPE', 'pubsub').catch(() => {});
  }

  async freeze(ms: number): Promise<FaultDetail> {
    this.server.freeze();
    await sleep(ms);
    this.server.thaw();
    return {};
  }

  restart(downMs: number): Promise<void> {
    return this.server.restart(downMs);
  }

  failover(): Promise<FaultDetail> {
    throw new Error('a failover needs --topology cluster');
  }

  killMaster(): Promise<FaultDetail> {
    throw new Error('killMaster needs --topology cluster');
  }

  stop(): Promise<void> {
    return this.server.stop();
  }
}

/** The first slot of each shard as `redis-cli --cluster create` splits 16384 slots over 3 masters. */
const SHARD_SLOTS = [0, 5461, 10923];

async function role(node: RedisServer): Promise<{ role: string; masterPort?: number; linkUp: boolean }> {
  const info = String(await node.command('INFO', 'replication'));
  const field = (name: string) => info.match(new RegExp(`^${name}:(.*)$`, 'm'))?.[1]?.trim();
  const port = field('master_port');
  return { role: field('role') ?? 'unknown', ...(port === undefined ? {} : { masterPort: Number(port) }), linkUp: field('master_link_status') === 'up' };
}

async function until(condition: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await condition().catch(() => false)) return true;
    if (performance.now() > deadline) return false;
    await sleep(50);
  }
}

class ClusterRedis implements CacheRedis {
  readonly topology = 'cluster';
  private readonly cluster = new RedisTestCluster(CLUSTER_MASTERS, { replicas: 1, nodeTimeoutMs: CLUSTER_NODE_TIMEOUT_MS });

  async start(): Promise<void> {
    await this.cluster.start();
  }

  address(): CacheAddress {
    return { nodes: this.cluster.startupNodes };
  }

  private master(shard: number): Promise<RedisServer> {
    return this.cluster.masterOf(SHARD_SLOTS[shard]!);
  }

  /** A running replica of `master`, as the replicas themselves report it. */
  private async replicaOf(master: RedisServer): Promise<RedisServer | undefined> {
    for (const node of this.cluster.nodes) {
      if (node === master || !node.running) continue;
      const r = await role(node).catch(() => undefined);
      if (r?.role === 'slave' && r.masterPort === master.port) return node;
    }
    return undefined;
  }

  /** Waits (bounded) for the cluster to be ok on every running node, and `node`, if given and running, to be a replica in sync. */
  private async settle(node?: RedisServer): Promise<boolean> {
    const healthy = await this.cluster.waitHealthy(SETTLE_MS).then(
      () => true,
      () => false,
    );
    if (node === undefined || !node.running) return healthy;
    const synced = await until(async () => {
      const r = await role(node);
      return r.role === 'master' || r.linkUp;
    }, SETTLE_MS);
    return healthy && synced;
  }

  async pause(ms: number, shard: number): Promise<FaultDetail> {
    const master = await this.master(shard);
    await master.clientPause(ms, 'ALL').catch(() => {});
    await sleep(ms);
    return { shard, master: master.port };
  }

  async killSubscribers(): Promise<void> {
    await Promise.all(this.cluster.nodes.filter((n) => n.running).map((n) => n.command('CLIENT', 'KILL', 'TYPE', 'pubsub').catch(() => {})));
  }

  async freeze(ms: number, shard: number): Promise<FaultDetail> {
    const master = await this.master(shard);
    const replica = await this.replicaOf(master);
    master.freeze();
    await sleep(ms);
    master.thaw();
    // Longer than cluster-node-timeout, the freeze may have ended in the replica's promotion
    // (the thawed node then follows it).
    await this.settle(master);
    const now = await this.master(shard).catch(() => undefined);
    return { shard, master: master.port, ...(now !== undefined && now !== master && now === replica ? { promoted: now.port } : {}) };
  }

  restart(): Promise<void> {
    throw new Error('restart is a single-server fault: on a cluster it is killMaster');
  }

  async failover(shard: number): Promise<FaultDetail> {
    const master = await this.master(shard);
    const replica = await this.replicaOf(master);
    if (replica === undefined) return { shard, master: master.port };
    // Sent to the replica: it asks its master to stop writes, catches up, and takes over.
    await replica.command('CLUSTER', 'FAILOVER').catch(() => {});
    const promoted = await until(async () => (await role(replica)).role === 'master', SETTLE_MS);
    await this.settle(master);
    return { shard, master: master.port, ...(promoted ? { promoted: replica.port } : {}) };
  }

  async killMaster(shard: number): Promise<FaultDetail> {
    const master = await this.master(shard);
    const replica = await this.replicaOf(master);
    await master.kill('SIGKILL');
    const promoted = replica !== undefined && (await until(async () => (await role(replica)).role === 'master', SETTLE_MS));
    await this.settle();
    // Back on its port with its nodes.conf (and no data): it learns of the newer epoch and
    // becomes a replica of the promoted node.
    await master.start().catch(() => {});
    const rejoined = master.running && (await until(async () => {
      const r = await role(master);
      return r.role === 'slave' && r.linkUp;
    }, SETTLE_MS));
    await this.settle();
    return { shard, master: master.port, ...(promoted ? { promoted: replica.port } : {}), rejoined };
  }

  stop(): Promise<void> {
    return this.cluster.stop();
  }
}
