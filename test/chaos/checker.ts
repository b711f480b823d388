/**
 * The checker: reads a whole history and lists every broken promise. Each rule is one
 * function below, with the promise it checks and the exemptions the README documents.
 * It is pure (a history in, violations out), so it is tested on hand-made histories too.
 */
import { opBound } from './bounds.js';
import type { ChaosValue, Fault, History, LoaderRun, LockOp, ReadOp, WriteOp } from './history.js';

/**
 * One pub/sub delivery: once a write has resolved, every process must have heard of it
 * within this long. The README's own figures for a coherent L1 are 5-50 ms (12 ms for a set),
 * up to 180 ms across a reconnect; this bound is a few times that, for a loaded 2-core machine.
 */
export const DELIVERY_BOUND_MS = 500;

/**
 * How long before an unclean failover (a master killed or frozen past cluster-node-timeout) a
 * write it acknowledged may still be missing from its replica: replication is asynchronous, and
 * on a loaded 2-core machine the replica's copy can trail by tens of milliseconds.
 */
export const REPLICATION_LAG_MS = 500;

/** Slack on an entry's expiry when deciding whether a loader run came before it (timers, the commit's round trip). */
export const EXPIRY_SLACK_MS = 100;

export interface Violation {
  rule: 'value' | 'stale-read' | 'loader-runs' | 'bound' | 'error-type' | 'fencing' | 'exclusion' | 'crash';
  message: string;
  ids: string[];
  at: number;
}

interface Window {
  start: number;
  end: number;
  kind: string;
}

/** Faults during which (some of) the cache's Redis did not answer, or its slots moved to another node. */
const REDIS_FAULTS = new Set(['pause', 'freeze', 'restart', 'failover', 'killMaster']);

function overlaps(a0: number, a1: number, b0: number, b1: number): boolean {
  return a0 <= b1 && b0 <= a1;
}

function isValue(v: unknown): v is ChaosValue {
  const o = v as ChaosValue;
  return typeof o === 'object' && o !== null && typeof o.key === 'string' && Number.isInteger(o.version) && o.version >= 0 && typeof o.src === 'string';
}

function keysOf(op: WriteOp): string[] {
  return Object.keys(op.versions);
}

export function check(h: History): Violation[] {
  const out: Violation[] = [];
  const c = h.config;
  const t = (at: number) => Math.round(at - h.start);

  // Periods during which Redis did not answer (a pause, a frozen or restarting server), up to
  // when every process is back to normal: a lock or lead lock may have run out meanwhile
  // (lockTtl), a command timed out (commandTimeout) and the cache skipped Redis for a while
  // (backendCooldown).
  const recovery = Math.max(c.lockTtl, c.lockTtlLock) + c.commandTimeout + c.backendCooldown + DELIVERY_BOUND_MS;
  const unreachable: Window[] = h.faults.filter((f) => REDIS_FAULTS.has(f.kind)).map((f) => ({ start: f.start, end: f.end + recovery, kind: f.kind }));
  // A backendError in any worker: that worker ran loaders without Redis (in-process
  // single-flight only, as documented) until backendCooldown passed.
  const degraded: Window[] = [
    ...unreachable,
    ...h.backendErrors.map((e) => ({ start: e.at - c.commandTimeout - 100, end: e.at + c.backendCooldown + c.commandTimeout + DELIVERY_BOUND_MS, kind: `backendError in worker ${e.worker}` })),
  ];
  const disturbed = (from: number, to: number, windows: Window[]) => windows.find((w) => overlaps(from, to, w.start, w.end));

  const ops = h.ops;
  const writes = ops.filter((o): o is WriteOp => o.kind === 'set' || o.kind === 'delete' || o.kind === 'invalidate');
  const reads = ops.filter((o): o is ReadOp => (o.kind === 'read' || o.kind === 'get') && o.ok === true && o.end !== undefined);
  const runsById = new Map(h.runs.map((r) => [r.run, r]));
  const opsById = new Map(ops.map((o) => [o.id, o]));
  const maxVersion = new Map<string, number>();
  // (A worker killed between its database bump and its report leaves a version only the database knows.)
  for (const [k, v] of Object.entries(h.finalVersions ?? {})) maxVersion.set(k, v);
  for (const w of writes) for (const [k, v] of Object.entries(w.versions)) maxVersion.set(k, Math.max(maxVersion.get(k) ?? 0, v));

  // Rule "value": a read returns a value of its own key, whole, made by a loader run or a set
  // that exists in the history with that very version (no other key's value, nothing torn,
  // no version the database never held).
  for (const r of reads) {
    if (r.value === undefined) continue;
    if (!isValue(r.value) || r.value.key !== r.key) {
      out.push({ rule: 'value', message: `read of ${r.key} returned ${JSON.stringify(r.value)}`, ids: [r.id], at: t(r.inv) });
      continue;
    }
    const v = r.value;
    const source = v.src.startsWith('set:') ? opsById.get(v.src.slice(4)) : runsById.get(v.src);
    const sourceVersion = source === undefined ? undefined : 'versions' in source ? source.versions[r.key] : (source as LoaderRun).version;
    const sourceKey = source === undefined ? undefined : 'versions' in source ? (r.key in source.versions ? r.key : undefined) : (source as LoaderRun).key;
    if (v.version > (maxVersion.get(r.key) ?? 0) || (source !== undefined && (sourceKey !== r.key || (sourceVersion !== undefined && sourceVersion !== v.version)))) {
      out.push({ rule: 'value', message: `read of ${r.key} returned version ${v.version} from ${v.src}, which never wrote that version of that key`, ids: [r.id, v.src], at: t(r.inv) });
    }
  }

  // Rule "stale-read": once a write (set, delete, invalidateTags) has resolved, a read invoked
  // more than DELIVERY_BOUND_MS later returns no version older than the one the write stands
  // for (a set: its value's version; a delete or an invalidation: the database's version after
  // the write's bump, which any later loader reads). Exemptions, each documented:
  //  (a) the value comes from a set that had not resolved before the write began (concurrent
  //      writes: either may land last) or that failed (its effect may land at any time);
  //  (b) the read waited for a loader run of the key that began before the write resolved and
  //      was still running (or had just returned) when the read was invoked: "a value whose
  //      loader was running during the invalidation counts as older: the callers that waited
  //      for it get it, the next ones do not". What they get is that run's value, or, when the
  //      run failed or timed out, the fail-safe stale value it falls back on ('stale' with
  //      reason 'error' or 'timeout', answered no earlier than the run ended). A read that
  //      joined its process's call still waiting for that run's value (a wake-up held up by a
  //      paused Redis) waited for it too;
  //  (c) the read answered 'stale', the run has a stale window, and either the write was
  //      `invalidateTags(..., { stale: true })` (which makes the old value stale on purpose),
  //      or the stale value was served as fail-safe ('error') while Redis was unreachable.
  //
  // Not promised, and so not checked: a write that an unclean failover may have lost. Redis
  // replicates asynchronously, and the library does not wait for replicas (docs/guarantees.md,
  // "What a failover can lose"): a write the master acknowledged shortly before it was killed
  // (killMaster, or a freeze that ended in its replica's promotion) may never have reached the
  // replica that takes over, and neither may one acknowledged while the cluster was settling.
  // Such a write is left out of this rule when it resolved from REPLICATION_LAG_MS before the
  // fault to the fault's end. A clean CLUSTER FAILOVER loses nothing and exempts nothing.
  const lossy = h.faults.filter((f) => f.kind === 'killMaster' || (f.kind === 'freeze' && f.promoted !== undefined));
  const mayBeLost = (w: WriteOp) => lossy.some((f) => w.end! >= f.start - REPLICATION_LAG_MS && w.end! <= f.end);
  const hasStaleWindow = c.staleWhileRevalidate > 0 || c.staleIfError > 0;
  const ackedWritesByKey = new Map<string, WriteOp[]>();
  for (const w of writes) {
    if (w.ok !== true || w.end === undefined || mayBeLost(w)) continue;
    for (const k of keysOf(w)) ackedWritesByKey.set(k, [...(ackedWritesByKey.get(k) ?? []), w]);
  }
  const runsOfKey = new Map<string, LoaderRun[]>();
  for (const run of h.runs) runsOfKey.set(run.key, [...(runsOfKey.get(run.key) ?? []), run]);
  const waitedForEarlierRun = (r: ReadOp, w: WriteOp) =>
    (runsOfKey.get(r.key) ?? []).some((l) => l.start < w.end! && r.inv <= (l.end ?? Infinity) + DELIVERY_BOUND_MS && (l.end === undefined || r.end! >= l.end));
  const readsOfWorkerKey = new Map<string, ReadOp[]>();
  for (const r of reads) readsOfWorkerKey.set(`${r.worker}/${r.key}`, [...(readsOfWorkerKey.get(`${r.worker}/${r.key}`) ?? []), r]);
  // Another read of the same process and key, invoked in time to wait for `run`, got its value
  // and was still waiting when `r` was invoked (so `r` joined it).
  const joinedWaitFor = (r: ReadOp, run: LoaderRun) =>
    (readsOfWorkerKey.get(`${r.worker}/${r.key}`) ?? []).some(
      (o) => o !== r && (o.value as ChaosValue | undefined)?.src === run.run && o.inv <= r.inv && r.inv <= o.end! && o.inv <= run.end! + DELIVERY_BOUND_MS,
    );
  for (const r of reads) {
    if (!isValue(r.value) || r.value.key !== r.key) continue;
    const v = r.value;
    const source = v.src.startsWith('set:') ? opsById.get(v.src.slice(4)) : undefined;
    const run = source === undefined ? runsById.get(v.src) : undefined;
    for (const w of ackedWritesByKey.get(r.key) ?? []) {
      if (!(w.end! + DELIVERY_BOUND_MS < r.inv && w.versions[r.key]! > v.version)) continue;
      if (source !== undefined && (source.ok !== true || source.end === undefined || source.end >= w.inv)) continue; // (a)
      if (run !== undefined && (run.end === undefined || r.inv <= run.end + DELIVERY_BOUND_MS || joinedWaitFor(r, run))) continue; // (b)
      if (r.status === 'stale' && (r.staleReason === 'error' || r.staleReason === 'timeout') && waitedForEarlierRun(r, w)) continue; // (b)
      if (r.status === 'stale' && hasStaleWindow) {
        if (w.kind === 'invalidate' && w.stale) continue; // (c)
        if (r.staleReason === 'error' && disturbed(r.inv, r.end!, unreachable)) continue; // (c)
      }
      out.push({
        rule: 'stale-read',
        message:
          `${r.kind} of ${r.key} invoked at +${t(r.inv)} ms (status ${r.status ?? '-'}${r.staleReason ? `/${r.staleReason}` : ''}) returned version ${v.version} (from ${v.src}), ` +
          `but ${w.kind} ${w.id} of version ${w.versions[r.key]} had resolved at +${t(w.end!)} ms`,
        ids: [r.id, w.id, v.src],
        at: t(r.inv),
      });
      break;
    }
  }

  // Rule "loader-runs": one loader run per key per expiry while its leader lives. Outside
  // disturbed periods (Redis unreachable and recovering, a backendError's cooldown), and with
  // no write on the key in between: no two runs of one key at once (two leaders), and no run
  // that starts after a run whose value was stored and before that value expired (a run where
  // a hit was due). Runs of a killed worker never end and are not counted as stored.
  const writesOn = (key: string, from: number, to: number) => writes.find((w) => key in w.versions && overlaps(from, to, w.inv, w.end ?? Infinity));
  // A run begins some time after its lead was taken (the look-up's reply, the hops to the
  // loader): a write that resolved in between drops that lead (its value will not be stored)
  // and lets another run begin. So the window in which a write excuses a second run opens
  // when the read that led it was invoked.
  const ledFrom = (run: LoaderRun): number => {
    let from = run.start;
    for (const r of readsOfWorkerKey.get(`${run.worker}/${run.key}`) ?? []) {
      if (r.inv <= run.start && (r.end ?? Infinity) >= run.start - EXPIRY_SLACK_MS && r.inv < from) from = r.inv;
    }
    return from;
  };
  for (const [key, unsorted] of runsOfKey) {
    const runs = [...unsorted].sort((a, b) => a.start - b.start);
    for (let j = 0; j < runs.length; j++) {
      const b = runs[j]!;
      for (let i = 0; i < j; i++) {
        const a = runs[i]!;
        if (a.end === undefined) continue;
        const together = b.start < a.end;
        const tookLong = c.hardTimeout !== undefined && a.end - a.start >= c.hardTimeout - EXPIRY_SLACK_MS;
        const early = a.ok === true && !tookLong && b.start > a.end && b.start < a.start + c.ttl - EXPIRY_SLACK_MS;
        if (!together && !early) continue;
        if (disturbed(a.start, b.start, degraded) || writesOn(key, Math.min(ledFrom(a), ledFrom(b)), b.start)) continue;
        out.push({
          rule: 'loader-runs',
          message: together
            ? `two loader runs of ${key} at once: ${a.run} (+${t(a.start)}..+${t(a.end)} ms) and ${b.run} (from +${t(b.start)} ms)`
            : `loader run ${b.run} of ${key} at +${t(b.start)} ms, while ${a.run}'s value (made from +${t(a.start)} ms, ttl ${c.ttl} ms) was still fresh`,
          ids: [a.run, b.run],
          at: t(b.start),
        });
        break;
      }
    }
  }

  // Rule "bound": no operation waits past its bound (see bounds.ts), and none is still
  // running when its worker has waited out the longest bound after being told to stop.
  for (const o of ops) {
    if (o.end === undefined) continue;
    const bound = opBound(o.kind, c);
    if (o.end - o.inv > bound) out.push({ rule: 'bound', message: `${o.kind} ${o.id} took ${Math.round(o.end - o.inv)} ms (bound ${bound} ms)`, ids: [o.id], at: t(o.inv) });
  }
  for (const o of h.hung) out.push({ rule: 'bound', message: `${o.kind} ${o.id}${o.key ? ` of ${o.key}` : ''} invoked at +${t(o.inv)} ms never ended`, ids: [o.id], at: t(o.inv) });

  // Rule "error-type": every error the library throws is a DogpileError with an E_* code;
  // a loader's own error reaches its own process's callers as it is.
  for (const o of ops) {
    if (o.ok !== false || o.error === undefined) continue;
    if (/^E_[A-Z_]+$/.test(o.error.code ?? '') || o.error.name === 'InjectedLoaderError') continue;
    out.push({ rule: 'error-type', message: `${o.kind} ${o.id} failed with ${o.error.name} (code ${o.error.code ?? 'none'}): ${o.error.message}`, ids: [o.id], at: t(o.inv) });
  }

  // Rules "fencing" and "exclusion" for RedisLock. A holding lasts from acquire()'s
  // resolution to the first of: release() called, the lock's signal aborted (lost), the
  // worker killed, the run's end. Fencing: an acquisition that resolved before another was
  // invoked has a smaller token, always (the README: tokens never go back, also when Redis
  // loses the counter). Exclusion: no two holdings of one name overlap, outside periods where
  // Redis was unreachable (a lock can run out there: the lock is for efficiency; fencing
  // tokens are what stays correct).
  const kills = h.faults.filter((f): f is Fault & { worker: number } => f.kind === 'killWorker' && f.worker !== undefined);
  const holdings = ops
    .filter((o): o is LockOp & { token: number; acquiredAt: number } => o.kind === 'lock' && o.token !== undefined && o.acquiredAt !== undefined)
    .map((o) => {
      const killed = o.end === undefined ? kills.find((k) => k.worker === o.worker && k.start >= o.inv)?.start : undefined;
      return { op: o, start: o.acquiredAt, end: Math.min(o.releaseInv ?? Infinity, o.lostAt ?? Infinity, killed ?? Infinity, h.end) };
    });
  for (const a of holdings) {
    for (const b of holdings) {
      if (a === b || a.op.name !== b.op.name) continue;
      if (a.op.acquiredAt < b.op.inv && !(a.op.token < b.op.token)) {
        out.push({ rule: 'fencing', message: `lock ${a.op.name}: ${a.op.id} got token ${a.op.token} before ${b.op.id} asked, which got ${b.op.token}`, ids: [a.op.id, b.op.id], at: t(b.start) });
      }
      if (a.op.id < b.op.id && a.op.token === b.op.token) {
        out.push({ rule: 'fencing', message: `lock ${a.op.name}: ${a.op.id} and ${b.op.id} both got token ${a.op.token}`, ids: [a.op.id, b.op.id], at: t(b.start) });
      }
      if (a.start < b.start && b.start < a.end && !disturbed(a.start, b.start, unreachable)) {
        out.push({
          rule: 'exclusion',
          message: `lock ${a.op.name} held twice: ${a.op.id} (token ${a.op.token}, +${t(a.start)}..+${t(a.end)} ms) and ${b.op.id} (token ${b.op.token}, from +${t(b.start)} ms)`,
          ids: [a.op.id, b.op.id],
          at: t(b.start),
        });
      }
    }
  }

  for (const crash of h.crashes) out.push({ rule: 'crash', message: `worker ${crash.worker} exited unexpectedly: ${crash.detail}`, ids: [], at: t(crash.at) });
  return out.sort((a, b) => a.at - b.at);
}
