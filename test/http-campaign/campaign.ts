/**
 * The differential HTTP campaign: for each adapter, cases (model.ts) run against the app behind
 * the guard, in two processes sharing one Redis (requests alternate between them), and every
 * reply is checked against the bare app's reply to the same bytes (oracle.ts). A case that
 * breaks a rule is shrunk by fast-check to the shortest sequence that still does, printed, and
 * written to failures/<adapter>-<seed>.json, which `--replay` runs again.
 */
import { closeSync, mkdirSync, mkdtempSync, openSync, readSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { JsonChild, root } from '../../tools/child-process.js';
import { RedisServer } from '../../tools/redis-server.js';
import { sleep } from '../../tools/basics.js';
import { now } from '../fixtures/child-io.js';
import { ADAPTERS, routeOf, TAG, TAGGED_ROUTES, type Adapter, type Run } from './apps.js';
import { caseArbitrary, CYCLE_WAITS, describeCase, IMS, requestBytes, unconditional, type Action, type Case, type RequestAction } from './model.js';
import { difference, FROM_STORE, notModified, rangeOf, summary, unstorable } from './oracle.js';
import { pathOf, runHost, sentRequest, unmatchedRun, type SentRequest } from './runs.js';
import { exchange, field, type WireReply } from './wire.js';

/** A connection that has not ended this long after its last byte is a violation (a hang), not a wait. */
export const EXCHANGE_BOUND_MS = 15_000;

export interface Violation {
  kind: string;
  adapter: Adapter;
  /** The index of the action in the case. */
  action: number;
  request: string;
  message: string;
  /** For a wrong answer: the fields of the echoed body that differ. */
  differs?: string;
  /** The authority the case ran with (its requests' Host). */
  host: string;
}

export interface AdapterStats {
  cases: number;
  shrinkRuns: number;
  /** Requests sent to the guarded app, and to the bare one. */
  guardedRequests: number;
  bareRequests: number;
  /** Guarded replies by X-Cache (none: not through the cache). */
  replies: Record<string, number>;
  /** Actions run, by kind. */
  actions: Record<string, number>;
  /** Handler runs of the guarded apps: live (a client's socket), refresh (none), unknown (a web adapter). */
  runs: Record<string, number>;
}

export interface AdapterResult {
  adapter: Adapter;
  seed: number;
  stats: AdapterStats;
  failures: Failure[];
  crash?: string;
}

export interface Failure {
  /** The seed whose search found it first (`--seed` replays it). */
  seed: number;
  signature: string;
  violation: Violation;
  case: Case;
  shrunk: boolean;
  file: string;
  text: string;
}

class CaseFailure extends Error {
  constructor(readonly violation: Violation) {
    super(`[${violation.kind}] ${violation.adapter}, action ${violation.action}: ${violation.message}`);
  }
}

/** The processes of a campaign: one Redis, two guarded app processes on it, one bare app process. */
export class Environment {
  readonly redis = new RedisServer();
  guarded: JsonChild[] = [];
  bare!: JsonChild;
  private ports = new Map<JsonChild, Record<string, number>>();
  /** The guarded processes' run logs (files of JSON lines) and how far each was read. */
  private readonly logDir = mkdtempSync(path.join(os.tmpdir(), 'http-campaign-runs-'));
  private readonly logs: { file: string; offset: number; partial: string }[] = [];
  /** Runs read from the logs, not yet checked, per adapter. */
  private readonly pending = new Map<Adapter, Run[]>();
  /** What each case sent and was answered, by its authority, per adapter (runs are matched against it). */
  readonly sent = new Map<Adapter, Map<string, CaseRecord>>();
  /** The Redis fault under way (one at a time: every adapter shares the server). */
  private fault: Promise<void> = Promise.resolve();
  private faulting = false;
  private invalidations = 0;

  constructor(
    readonly adapters: readonly Adapter[],
    readonly headAware = false,
  ) {}

  private async app(label: string, redisUrl: string | undefined): Promise<JsonChild> {
    let runLog: string | undefined;
    if (redisUrl !== undefined) {
      runLog = path.join(this.logDir, `${this.logs.length}.ndjson`);
      writeFileSync(runLog, '');
      this.logs.push({ file: runLog, offset: 0, partial: '' });
    }
    const child = new JsonChild(label, ['--import', 'tsx', path.join(root, 'test/http-campaign/server.ts'), JSON.stringify({ adapters: this.adapters, redisUrl, headAware: this.headAware, runLog })]);
    const listening = await child.take('listening', 90_000);
    this.ports.set(child, listening.ports as Record<string, number>);
    return child;
  }

  async start(): Promise<this> {
    await this.redis.start();
    [this.guarded[0], this.guarded[1], this.bare] = await Promise.all([this.app('guarded app 1', this.redis.url), this.app('guarded app 2', this.redis.url), this.app('bare app', undefined)]);
    return this;
  }

  port(child: JsonChild, adapter: Adapter): number {
    return this.ports.get(child)![adapter]!;
  }

  /** A process that ended while it should be serving, described; undefined when all run. */
  crashed(): string | undefined {
    for (const child of [...this.guarded, this.bare]) {
      if (child && !child.running) return `${child.label} exited (${child.proc.exitCode ?? child.proc.signalCode}): ${child.failed ?? ''}${child.stderr.slice(-2000)}`;
    }
    return undefined;
  }

  /** Reads what the run logs gained since the last read into the adapters' pending runs. */
  readRuns(): void {
    const buffer = Buffer.alloc(1 << 20);
    for (const log of this.logs) {
      const fd = openSync(log.file, 'r');
      try {
        for (;;) {
          const n = readSync(fd, buffer, 0, buffer.length, log.offset);
          if (n === 0) break;
          log.offset += n;
          const lines = (log.partial + buffer.subarray(0, n).toString('utf8')).split('\n');
          log.partial = lines.pop()!;
          for (const line of lines) {
            if (line === '') continue;
            const run = JSON.parse(line) as Run;
            const list = this.pending.get(run.adapter) ?? [];
            list.push(run);
            this.pending.set(run.adapter, list);
          }
        }
      } finally {
        closeSync(fd);
      }
    }
  }

  /** The runs of `adapter` read so far (they are handed out once, to be checked). */
  takeRuns(adapter: Adapter): Run[] {
    this.readRuns();
    const runs = this.pending.get(adapter) ?? [];
    this.pending.set(adapter, []);
    return runs;
  }

  /** The runs of `adapter` read so far, left to be checked. */
  peekRuns(adapter: Adapter): readonly Run[] {
    this.readRuns();
    return this.pending.get(adapter) ?? [];
  }

  /** `invalidateTags([TAG])` in a guarded process (alternating); resolves true once it has, false when it failed (Redis away). */
  /** Asks one guarded process to invalidate the campaign's tag: which one (its index), or undefined when it failed (Redis away). */
  async invalidate(adapter: Adapter): Promise<number | undefined> {
    const id = ++this.invalidations;
    const by = id % 2;
    const child = this.guarded[by]!;
    child.send({ cmd: 'invalidate', id, adapter, tags: [TAG] });
    const answer = await child.take('invalidated', EXCHANGE_BOUND_MS, (m) => m.id === id);
    return answer.error === undefined ? by : undefined;
  }

  /** Starts a Redis fault unless one is under way (then nothing happens); resolves at once. */
  startFault(fault: 'pause' | 'restart', ms: number): boolean {
    if (this.faulting) return false;
    this.faulting = true;
    const run = fault === 'pause' ? this.redis.clientPause(ms) : this.redis.restart(ms);
    this.fault = run.finally(() => {
      this.faulting = false;
    });
    return true;
  }

  /** Waits for the fault under way to end (a restart: Redis runs again). */
  faultEnded(): Promise<void> {
    return this.fault;
  }

  async stop(): Promise<void> {
    await this.fault.catch(() => {});
    await Promise.all([...this.guarded, this.bare].filter(Boolean).map((c) => c.exit(15_000)));
    await this.redis.stop();
    rmSync(this.logDir, { recursive: true, force: true });
  }
}

export function emptyStats(): AdapterStats {
  return { cases: 0, shrinkRuns: 0, guardedRequests: 0, bareRequests: 0, replies: {}, actions: {}, runs: {} };
}

function bump(counts: Record<string, number>, key: string, n = 1): void {
  counts[key] = (counts[key] ?? 0) + n;
}

/** What an action exercises, one count each: its kind, method, form and header variants. */
function actionKinds(a: Action): string[] {
  if (a.do === 'wait') return [`wait ${a.ms} ms`];
  if (a.do === 'invalidate') return ['invalidate'];
  if (a.do === 'redis') return [`redis ${a.fault} ${a.ms} ms`];
  if (a.do === 'write') return [`write ${a.method}`];
  const kinds = a.do === 'cycle' ? ['cycle'] : [a.copies > 1 ? `${a.method} burst` : a.method];
  if (a.form !== 'origin') kinds.push(a.form);
  for (const [name, value] of Object.entries(a.headers)) kinds.push(value === true ? name : `${name} ${String(value)}`);
  return kinds;
}

let serial = 0;

/** What one case sent, and the validators (`ETag`, `Last-Modified`) of the replies it got: a revalidation may send those. */
interface CaseRecord {
  requests: SentRequest[];
  validators: Set<string>;
}

/** How long after a case's last reply its trailing background refreshes have to land in the run log. */
const RUNS_SETTLE_MS = 100;

/** Runs one case; returns its first violation (the case stops there), or undefined. */
export async function runCase(env: Environment, adapter: Adapter, c: Case, stats: AdapterStats): Promise<Violation | undefined> {
  const host = `c${++serial}-${process.pid}.${adapter}.test`;
  const sent: SentRequest[] = [];
  const validators = new Set<string>();
  let cases = env.sent.get(adapter);
  if (!cases) env.sent.set(adapter, (cases = new Map()));
  cases.set(host, { requests: sent, validators });
  let turn = 0;
  /**
   * The last invalidation that resolved: when it was sent (a store-served tagged answer must
   * come from a run started after it), when it resolved, and which guarded process made it.
   */
  let invalidation: { sent: number; resolved: number; by: number } | undefined;
  let last = 0;
  try {
    for (const [index, a] of c.actions.entries()) {
      last = index;
      for (const kind of actionKinds(a)) bump(stats.actions, kind);
      const violate = (kind: string, message: string, bytes = ''): Violation => ({ kind, adapter, action: index, request: bytes, message, host });
      if (a.do === 'wait') {
        await sleep(a.ms);
        continue;
      }
      if (a.do === 'redis') {
        if (!env.startFault(a.fault, a.ms)) bump(stats.actions, `redis ${a.fault} skipped (another under way)`);
        continue;
      }
      if (a.do === 'invalidate') {
        const started = now();
        const done = await env.invalidate(adapter).catch((error: unknown) => violate('no-invalidation', `invalidateTags did not answer: ${String(error)}`));
        if (typeof done === 'object') return done;
        if (typeof done === 'number') invalidation = { sent: started, resolved: now(), by: done };
        else bump(stats.actions, 'invalidate failed (Redis away)');
        continue;
      }
      const bytes = requestBytes(c, a, host);
      const request = sentRequest(bytes);
      sent.push(request);
      const broken = routeOf(c.pool[a.resource % c.pool.length]!.path) === 'broken';
      const rounds = a.do === 'cycle' ? [1, ...CYCLE_WAITS.map(() => 1)] : [a.do === 'request' ? a.copies : 1];
      for (const [round, copies] of rounds.entries()) {
        if (round > 0) await sleep(CYCLE_WAITS[round - 1]!);
        const sentAt = now();
        const replies = [];
        const servedBy: number[] = [];
        for (let i = 0; i < copies; i++) {
          servedBy.push(turn % 2);
          replies.push(exchange(env.port(env.guarded[turn++ % 2]!, adapter), bytes, EXCHANGE_BOUND_MS));
        }
        stats.guardedRequests += copies;
        for (const [copy, result] of (await Promise.all(replies)).entries()) {
          if (!result.ok) {
            if (result.timedOut || !broken) return violate('no-reply', result.error, bytes);
            // A body that fails mid-stream: the connection ends, and what it sent is never stored.
            const xCache = result.fields?.find(([n]) => n === 'x-cache')?.[1]?.toUpperCase();
            bump(stats.replies, `${xCache ?? 'none'} (broken body)`);
            if (xCache !== undefined && FROM_STORE.has(xCache)) return violate('broken-from-store', `a body that failed mid-stream answered ${xCache}`, bytes);
            continue;
          }
          // A whole answer on a /broken/ path: the app routed the request elsewhere (Fastify's
          // handler sees an absolute-form target as its path); judged as any answer, against
          // what the bare app gives.
          if (broken) bump(stats.replies, 'whole body on a /broken/ path');
          for (const name of ['etag', 'last-modified']) {
            const value = field(result.reply, name);
            if (value !== undefined) validators.add(value);
          }
          const message = await judge(env, adapter, a, bytes, result.reply, stats, broken);
          if (message) return { ...violate(message[0], message[1], bytes), ...(message[2] === undefined ? {} : { differs: message[2] }) };
          // The other process hears of an invalidation within one pub/sub delivery (docs/tags-namespaces-l1.md).
          const judged = invalidation !== undefined && (servedBy[copy] === invalidation.by || sentAt - invalidation.resolved >= DELIVERY_MS);
          const stale = judged ? predatesInvalidation(env, adapter, host, request, result.reply, invalidation!.sent, sentAt) : undefined;
          if (stale) return violate('served-past-invalidation', stale, bytes);
        }
      }
    }
  } finally {
    // The next case starts with Redis up.
    await env.faultEnded().catch(() => {});
  }
  await sleep(RUNS_SETTLE_MS);
  const wrong = checkRuns(env, adapter, stats);
  return wrong === undefined ? undefined : { kind: wrong[0], adapter, action: last, request: '', message: wrong[1], host };
}

/** How long the campaign gives a pub/sub message to reach the other guarded process (one delivery, on a busy machine). */
const DELIVERY_MS = 250;

/**
 * After `invalidateTags` resolved (in the other guarded process, once a delivery later), a tagged answer from the store must come from a handler run
 * of that case's authority and path that started after the invalidation was sent (a run under
 * way during it counts as older: docs/tags-namespaces-l1.md). Undefined when one did.
 */
function predatesInvalidation(env: Environment, adapter: Adapter, host: string, request: SentRequest, reply: WireReply, invalidatedAt: number, sentAt: number): string | undefined {
  const xCache = field(reply, 'x-cache')?.toUpperCase();
  if (xCache === undefined || !FROM_STORE.has(xCache)) return undefined;
  const path = pathOf(request.target);
  if (!TAGGED_ROUTES.includes(routeOf(path ?? ''))) return undefined;
  const runs = env.peekRuns(adapter).filter((r) => runHost(r) === host && pathOf(r.target) === path);
  if (runs.some((r) => r.at >= invalidatedAt)) return undefined;
  const latest = runs.reduce((m, r) => Math.max(m, r.at), -Infinity);
  return `answered ${xCache} ${Math.round(sentAt - invalidatedAt)} ms after invalidateTags was sent (it resolved before the request), and no handler run for ${path} started since (the latest ${Number.isFinite(latest) ? `${Math.round(invalidatedAt - latest)} ms before it` : 'none seen'}): ${summary(reply)}`;
}

/** The run-log oracle (runs.ts) on the runs of `adapter` logged so far: [kind, message] of the first that breaks it. */
function checkRuns(env: Environment, adapter: Adapter, stats: AdapterStats): [string, string] | undefined {
  const cases = env.sent.get(adapter)!;
  for (const run of env.takeRuns(adapter)) {
    bump(stats.runs, run.refresh ? 'refresh' : 'live');
    const record = cases.get(runHost(run));
    if (record === undefined) return ['run-of-no-request', `a handler run for a host no request sent: ${JSON.stringify(run)}`];
    const vary = routeOf(pathOf(run.target) ?? '') === 'vary' ? ['accept-language'] : [];
    const why = unmatchedRun(adapter, run, record.requests, vary, record.validators);
    if (why !== undefined) return ['run-not-sent', `a handler run (${run.refresh ? 'refresh' : 'live'}) saw what no request sent: ${why}\n      run: ${JSON.stringify(run)}`];
  }
  return undefined;
}

/**
 * True when the app routes `bytes` to the route whose body fails mid-stream: its GET, without
 * conditions, breaks on the bare app. A /broken/ path may be routed elsewhere (Fastify's handler
 * sees an absolute-form target as its path), and then its answer is whole, and storable.
 */
async function routedToBroken(env: Environment, adapter: Adapter, bytes: string, stats: AdapterStats): Promise<boolean> {
  stats.bareRequests++;
  const r = await exchange(env.port(env.bare, adapter), unconditional(bytes).replace(/^HEAD /, 'GET '), EXCHANGE_BOUND_MS);
  return !r.ok;
}

/** The oracle on one guarded reply: [kind, message] of the rule it breaks, or undefined. */
async function judge(env: Environment, adapter: Adapter, a: RequestAction, bytes: string, got: WireReply, stats: AdapterStats, broken: boolean): Promise<[kind: string, message: string, differs?: string] | undefined> {
  const xCache = field(got, 'x-cache')?.toUpperCase();
  bump(stats.replies, xCache ?? 'none');
  const fromStore = xCache !== undefined && FROM_STORE.has(xCache);
  const headers = a.do === 'write' ? {} : a.headers;
  if (fromStore && headers.credentials !== undefined) return ['credentials-from-store', `a request with ${headers.credentials} answered ${xCache}: ${summary(got)}`];
  if (broken && got.status === 304 && (await routedToBroken(env, adapter, bytes, stats))) {
    // The leader's own client asked `If-None-Match: *`: it is answered 304 from the head of the
    // handler's 200 (RFC 9110 §13.1.2), as a cache answers from a response's header fields,
    // though the body then fails. The bare app's answer breaks: there is no whole one to
    // compare with. The broken route sends no validator, so `*` is the only condition its head
    // makes false, and nothing of it is ever stored.
    if (fromStore) return ['broken-from-store', `a body that fails mid-stream answered ${xCache}: ${summary(got)}`];
    if (headers.conditional !== 'inm-star') return ['bad-304', `a 304 for a response without validators, to a request with ${headers.conditional ?? 'no condition'}: ${summary(got)}`];
    bump(stats.replies, '304 to If-None-Match: * on a /broken/ path');
    return undefined;
  }
  const bare = async (text: string): Promise<WireReply> => {
    stats.bareRequests++;
    const r = await exchange(env.port(env.bare, adapter), text, EXCHANGE_BOUND_MS);
    if (!r.ok) throw new Error(`the bare ${adapter} app did not answer ${JSON.stringify(text)}: ${r.error} (the guarded app answered ${summary(got)}, X-Cache ${xCache ?? 'none'})`);
    return r.reply;
  };
  const expected = await bare(bytes);
  const head = a.do === 'request' && a.method === 'HEAD';
  let full = expected;
  let diff: string | undefined;
  const special = (s: number) => s === 304 || s === 206 || s === 416;
  if (got.status === expected.status && !(got.status === 304 || got.status === 416)) {
    diff = difference(got, expected, head);
  } else if (special(got.status) || special(expected.status)) {
    full = await bare(unconditional(bytes));
    const conditional = headers.conditional;
    const request = conditional === undefined ? {} : conditional.startsWith('inm') ? { inm: conditional === 'inm-v1' ? '"v1"' : conditional === 'inm-v2' ? '"v2"' : '*' } : { ims: IMS[conditional as keyof typeof IMS] };
    if (got.status === 304) {
      if (full.status !== 200 || !notModified(request, full)) diff = `304 to ${JSON.stringify(request)}, the app's full answer does not satisfy it: ${summary(full)}`;
      else if (field(got, 'etag') !== undefined && field(got, 'etag') !== field(full, 'etag')) diff = `304 with ETag ${field(got, 'etag')}, the app's is ${field(full, 'etag')}`;
    } else if (got.status === 416) {
      // Its content is not the representation (RFC 9110 §15.5.17): only the length it names is checked.
      diff = rangeOf(got, full);
    } else if (got.status === 206) {
      diff = rangeOf(got, full) ?? difference({ ...got, status: full.status, body: full.body }, full, true, ['content-range', 'accept-ranges']);
    } else {
      diff = difference(got, full, head);
    }
  } else {
    diff = difference(got, expected, head);
  }
  if (diff !== undefined) return ['wrong-answer', `X-Cache ${xCache ?? '(none)'}: ${diff}\n      got:      ${summary(got)}\n      expected: ${summary(expected)}`, bodyDifference(got, full)];
  if (fromStore) {
    const why = unstorable(full) ?? unstorable(got);
    if (why !== undefined) return ['unstorable-from-store', `a reply the app marks ${why} answered ${xCache}: ${summary(got)}`];
  }
  return undefined;
}

/** The echoed body's fields, most telling first. */
const BODY_FIELDS = ['query', 'path', 'route', 'target', 'link', 'host', 'xfh', 'acceptLanguage', 'method', 'credentials'];

/** The first field of the echoed body that differs between two replies ('range', 'status', 'body' or 'fields' when no echoed field does). */
function bodyDifference(got: WireReply, expected: WireReply): string {
  if (got.status === 206 || got.status === 416) return 'range';
  if (got.status !== expected.status) return `status ${got.status} for ${expected.status}`;
  try {
    const g = JSON.parse(got.body.toString('utf8')) as Record<string, unknown>;
    const e = JSON.parse(expected.body.toString('utf8')) as Record<string, unknown>;
    const key = BODY_FIELDS.find((k) => JSON.stringify(g[k]) !== JSON.stringify(e[k]));
    if (key !== undefined) return key;
  } catch {
    /* not JSON: a body cut short, or none */
  }
  return got.body.equals(expected.body) ? 'fields' : 'body';
}

export interface CampaignOptions {
  seed: number;
  adapters: readonly Adapter[];
  /** How long each adapter searches (they search at once). */
  searchMs: number;
  /** How long a failure is shrunk at most. */
  shrinkMs: number;
  /** At most this many cases per adapter. */
  maxCases?: number;
  /** Apps whose body names a HEAD as HEAD (apps.ts). */
  headAware?: boolean;
  /** Where failures are written (default: test/http-campaign/failures). */
  failuresDir?: string;
  log?: (line: string) => void;
}

/** At most this many distinct violations are shrunk per adapter. */
const MAX_FAILURES = 6;

/**
 * What tells two violations apart without shrinking them: the rule, and for a wrong answer the
 * first field of the echoed body that differs, in the order `BODY_FIELDS` gives (`query` for
 * another query, `path` for another path, `target` for another authority...), else what else
 * differs (`range`, `status`, `fields`).
 */
export function signature(v: Violation): string {
  return `${v.kind}: ${v.differs ?? v.message.split(':')[0]}`;
}

/** Searches one adapter; every violation of a new signature is shrunk and written; then the search goes on with the next seed. */
async function campaignFor(env: Environment, adapter: Adapter, options: CampaignOptions): Promise<AdapterResult> {
  const stats = emptyStats();
  const log = options.log ?? (() => {});
  const failures: Failure[] = [];
  const seen = new Set<string>();
  // Shrinking does not count against the search time.
  let deadline = performance.now() + options.searchMs;
  /** While shrinking: the signature being shrunk (a smaller case counts only when it breaks the rule the same way). */
  let shrinking: string | undefined;
  let crash: string | undefined;
  const property = fc.asyncProperty(caseArbitrary, async (c) => {
    if (crash !== undefined) throw new Error(crash);
    if (shrinking !== undefined) stats.shrinkRuns++;
    else stats.cases++;
    const violation = await runCase(env, adapter, c, stats);
    if (violation?.kind === 'no-reply') await sleep(200); // a process that died: let its exit be seen
    crash = env.crashed();
    if (crash !== undefined) throw new Error(crash);
    if (violation && (shrinking === undefined || signature(violation) === shrinking)) throw new CaseFailure(violation);
  });
  for (let round = 0; failures.length < MAX_FAILURES; round++) {
    const left = deadline - performance.now();
    const casesLeft = (options.maxCases ?? Infinity) - stats.cases;
    if (left <= 0 || casesLeft <= 0) break;
    const seed = options.seed + round;
    shrinking = undefined;
    const search = await fc.check(property, { seed, numRuns: Math.min(casesLeft, 1_000_000), endOnFailure: true, interruptAfterTimeLimit: left, markInterruptAsFailure: false });
    if (!search.failed) break;
    if (!(search.errorInstance instanceof CaseFailure)) {
      if (search.errorInstance !== null) crash ??= `the search stopped: ${String(search.errorInstance)}`;
      else log(`${adapter}: seed ${seed}: the search ended without a case (${search.numRuns} runs, ${search.numSkips} skipped, interrupted: ${search.interrupted})`);
      break;
    }
    const found = search.errorInstance;
    const sig = signature(found.violation);
    if (seen.has(sig)) {
      log(`${adapter}: seed ${seed}, case ${search.numRuns}: again ${sig}`);
      continue;
    }
    seen.add(sig);
    log(`${adapter}: seed ${seed}, case ${search.numRuns}: ${sig}; shrinking`);
    shrinking = sig;
    const shrinkStart = performance.now();
    const shrink = await fc.check(property, { seed, path: search.counterexamplePath ?? undefined, interruptAfterTimeLimit: options.shrinkMs, markInterruptAsFailure: false });
    deadline += performance.now() - shrinkStart;
    const shrunk = shrink.failed && shrink.counterexample !== null && shrink.errorInstance instanceof CaseFailure;
    const violation = shrunk ? (shrink.errorInstance as CaseFailure).violation : found.violation;
    // The actions after the one that broke the rule never ran.
    const ran = shrunk ? shrink.counterexample![0] : search.counterexample![0];
    const theCase: Case = { ...ran, actions: ran.actions.slice(0, violation.action + 1) };
    const dir = options.failuresDir ?? path.join(root, 'test/http-campaign/failures');
    mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `${adapter}-${seed}.json`);
    const text = describeCase(theCase, violation.host);
    writeFileSync(file, `${JSON.stringify({ adapter, seed, headAware: options.headAware === true, signature: sig, violation, case: theCase, requests: text.split('\n') }, null, 2)}\n`);
    failures.push({ seed, signature: sig, violation, case: theCase, shrunk, file, text });
  }
  return { adapter, seed: options.seed, stats, failures, ...(crash === undefined ? {} : { crash }) };
}

/** Runs the campaign on every adapter at once, in one environment. */
export async function runCampaign(options: CampaignOptions): Promise<AdapterResult[]> {
  const env = await new Environment(options.adapters, options.headAware).start();
  try {
    return await Promise.all(options.adapters.map((adapter) => campaignFor(env, adapter, options)));
  } finally {
    await env.stop();
  }
}

/** Runs a written case again (up to `attempts` times: timing decides whether a background refresh lands in between). */
export async function replay(adapter: Adapter, c: Case, headAware = false, attempts = 3): Promise<Violation | undefined> {
  const env = await new Environment([adapter], headAware).start();
  try {
    for (let i = 0; i < attempts; i++) {
      const violation = await runCase(env, adapter, c, emptyStats());
      if (violation) return violation;
    }
    return undefined;
  } finally {
    await env.stop();
  }
}

export function report(results: AdapterResult[], log: (line: string) => void): void {
  for (const r of results) {
    const s = r.stats;
    log(`${r.adapter}: ${s.cases} cases (+${s.shrinkRuns} while shrinking), ${s.guardedRequests} requests to the guarded app, ${s.bareRequests} to the bare one; replies ${JSON.stringify(s.replies)}`);
    log(`  actions: ${Object.entries(s.actions).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, n]) => `${k} ${n}`).join(', ')}`);
    log(`  handler runs checked: ${JSON.stringify(s.runs)}`);
    if (r.crash) log(`  CRASH: ${r.crash}`);
    for (const f of r.failures) {
      const v = f.violation;
      log(`  VIOLATION [${f.signature}] at action ${v.action}${f.shrunk ? ' (shrunk)' : ''}: ${v.message}`);
      log(`  case:\n${f.text.replace(/^/gm, '    ')}`);
      log(`  written to ${path.relative(root, f.file)}; replay: npm run http-campaign -- --replay ${path.relative(root, f.file)}  (or --seed ${f.seed} --adapters ${r.adapter})`);
    }
  }
}

export { ADAPTERS };
