import { describe, expect, it } from 'vitest';
import { Joiners } from '../src/core/joiners.js';
import type { Settled } from '../src/core/settled.js';
import { sleep } from '../tools/basics.js';

/** A flight settled by hand. */
function flight(): { promise: Promise<Settled<unknown>>; settle: (s: Settled<unknown>) => void; fail: (e: unknown) => void } {
  let settle!: (s: Settled<unknown>) => void;
  let fail!: (e: unknown) => void;
  const promise = new Promise<Settled<unknown>>((resolve, reject) => {
    settle = resolve;
    fail = reject;
  });
  return { promise, settle, fail };
}

const value = (v: unknown): Settled<unknown> => ({ kind: 'shared', value: v, status: 'miss', createdAt: 0, degraded: false });
const own = (v: unknown): Settled<unknown> => ({ kind: 'own', value: v, status: 'miss', createdAt: 0, degraded: false });

describe('Joiners: the plain callers of a flight, kept as columns', () => {
  it('hands each caller its own loader and TTL on the rare endings, whether the TTLs agree or not', async () => {
    const seen: string[] = [];
    const joiners = new Joiners<string, number>(
      (key, answer, loader, ttl, settled, error) => {
        seen.push(`${key} ${loader} ${ttl} ${settled?.kind === 'own' ? 'private' : String(error)}`);
        answer(`${loader}@${ttl}`);
      },
      () => {
        throw new Error('no caller times out here');
      },
    );
    const f = flight();
    const calls = [joiners.join('k', f.promise, 10_000, 'a', 1000), joiners.join('k', f.promise, 10_000, 'b', 1000), joiners.join('k', f.promise, 10_000, 'c', 2000), joiners.join('k', f.promise, 10_000, 'd', 1000)];
    f.settle(own(undefined));
    expect(await Promise.all(calls)).toEqual(['a@1000', 'b@1000', 'c@2000', 'd@1000']);
    expect(seen).toEqual(['k a 1000 private', 'k b 1000 private', 'k c 2000 private', 'k d 1000 private']);

    // An error for all: each caller again gets its own handling (here a rejection for one of them).
    const g = flight();
    const rejecting = new Joiners<string, number>(
      (_key, answer, loader) => answer(loader === 'y' ? Promise.reject(new Error(`no ${loader}`)) : loader),
      () => {},
    );
    const both = [rejecting.join('k', g.promise, 10_000, 'x', 5), rejecting.join('k', g.promise, 10_000, 'y', 5)];
    g.fail(new Error('boom'));
    const settled = await Promise.allSettled(both);
    expect(settled[0]).toEqual({ status: 'fulfilled', value: 'x' });
    const second = settled[1]!;
    expect(second.status === 'rejected' && (second.reason as Error).message).toBe('no y');
  });

  it('times callers out in join order, those of one millisecond together, and answers the rest with the flight', async () => {
    const timedOut: string[] = [];
    const joiners = new Joiners<string, number>(
      () => {
        throw new Error('only values here');
      },
      (_key, answer, loader, ttl) => {
        timedOut.push(`${loader}@${ttl}`);
        answer(`timeout ${loader}`);
      },
    );
    const f = flight();
    // Three callers in one synchronous burst (one deadline run, or two across a millisecond), one with another TTL.
    const early = [joiners.join('k', f.promise, 40, 'e1', 7), joiners.join('k', f.promise, 40, 'e2', 7), joiners.join('k', f.promise, 40, 'e3', 9)];
    await sleep(15);
    const late = joiners.join('k', f.promise, 200, 'l1', 7);
    expect(await Promise.all(early)).toEqual(['timeout e1', 'timeout e2', 'timeout e3']);
    expect(timedOut).toEqual(['e1@7', 'e2@7', 'e3@9']);
    // Joined after the early callers timed out, while `late` still waits.
    const later = joiners.join('k', f.promise, 5_000, 'l2', 11);
    f.settle(value('v'));
    expect(await late).toBe('v');
    expect(await later).toBe('v');
    expect(timedOut).toHaveLength(3);
  });

  it('answers early callers from answer(); callers joining after it wait for the flight itself', async () => {
    const joiners = new Joiners<string, number>(
      () => {},
      () => {},
    );
    const f = flight();
    const first = joiners.join('k', f.promise, 10_000, 'a', 1);
    joiners.answer(f.promise, value('early'));
    const after = joiners.join('k', f.promise, 10_000, 'b', 1);
    expect(await first).toBe('early');
    let afterValue: unknown;
    void after.then((v) => (afterValue = v));
    await sleep(5);
    expect(afterValue).toBeUndefined();
    f.settle(value('final'));
    expect(await after).toBe('final');
  });
});
