import { laterStamp, NO_STAMP, type TagStamp } from './tags.js';
import type { TagStamps } from './types.js';

/**
 * The generation of a cache or namespace is a stamp like a tag's (`hard:stale`, on the store's
 * clock), written by `clear()` and judged by the same rule (`stampVerdict` in tags.ts, applied
 * by stamped-backend.ts): an entry whose run began at or before it is a miss (or stale).
 * A cache's entries are judged by the stamps of its whole chain: the root cache's, then each
 * enclosing namespace's, then its own. Names: `/` for the root, `/a`, `/a/b` for namespaces.
 */
export const ROOT_GENERATION = '/';

/** How long a generation stamp is kept in Redis: longer than any entry lives (ten years). */
export const GENERATION_KEEP_MS = 3650 * 24 * 3600 * 1000;

/**
 * Generation stamps of the in-process store: a map that never forgets (one stamp per cleared
 * namespace), read without a clock (a hit in memory pays one map lookup).
 */
export class MemoryGenerations implements TagStamps {
  private readonly stamps = new Map<string, TagStamp>();

  constructor(private readonly clock: () => number) {}

  known(name: string): TagStamp {
    return this.stamps.get(name) ?? NO_STAMP;
  }

  async load(names: readonly string[]): Promise<TagStamp[]> {
    return names.map((name) => this.known(name));
  }

  async invalidate(names: readonly string[], stale: boolean, _keepFor: number): Promise<void> {
    const at = this.clock();
    const stamp: TagStamp = stale ? { hard: 0, stale: at } : { hard: at, stale: 0 };
    for (const name of names) this.stamps.set(name, laterStamp(this.known(name), stamp));
  }

  close(): void {
    this.stamps.clear();
  }
}
