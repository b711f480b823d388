/**
 * The operations of one worker loop, drawn from its own PRNG: every draw happens here, before
 * the operation runs, so the sequence depends on the seed alone and not on timing.
 */
import type { Prng } from './prng.js';
import type { RunConfig } from './history.js';

export type PlannedOp =
  | { kind: 'read'; key: string; thinkMs: number }
  | { kind: 'get'; key: string; thinkMs: number }
  | { kind: 'set'; key: string; thinkMs: number }
  | { kind: 'delete'; key: string; thinkMs: number }
  | { kind: 'invalidate'; tag: string; stale: boolean; thinkMs: number }
  | { kind: 'lock'; name: string; holdMs: number; thinkMs: number };

export function planOp(rng: Prng, config: RunConfig): PlannedOp {
  const kind = rng.weighted({ read: 60, set: 10, delete: 6, invalidate: 6, lock: 8 });
  switch (kind) {
    case 'read': {
      const key = rng.pick(config.keys);
      return { kind: rng.chance(0.85) ? 'read' : 'get', key, thinkMs: rng.int(0, 30) } as PlannedOp;
    }
    case 'set':
    case 'delete':
      return { kind, key: rng.pick(config.keys), thinkMs: rng.int(0, 30) };
    case 'invalidate': {
      const tag = rng.pick([...new Set(Object.values(config.tags))]);
      return { kind, tag, stale: rng.chance(0.5), thinkMs: rng.int(0, 30) };
    }
    case 'lock': {
      const name = rng.pick(config.lockNames);
      return { kind, name, holdMs: rng.int(0, config.lockHoldMs), thinkMs: rng.int(0, 30) };
    }
  }
}
