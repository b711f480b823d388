import { laterStamp, NO_STAMP, type TagStamp } from './tags.js';
import type { TagStamps } from './types.js';

/** Prune expired stamps when the map grows past this (and then every time it doubles). */
const PRUNE_AT = 10_000;

/** Tag stamps of the in-process store: a map in this process, each stamp kept `keepFor` ms. */
export class MemoryTagStamps implements TagStamps {
  private readonly stamps = new Map<string, { stamp: TagStamp; until: number }>();
  private pruneAt = PRUNE_AT;

  known(tag: string): TagStamp {
    const held = this.stamps.get(tag);
    if (held === undefined) return NO_STAMP;
    if (held.until <= performance.now()) {
      this.stamps.delete(tag);
      return NO_STAMP;
    }
    return held.stamp;
  }

  async load(tags: readonly string[]): Promise<TagStamp[]> {
    return tags.map((tag) => this.known(tag));
  }

  constructor(private readonly clock: () => number) {}

  async invalidate(tags: readonly string[], stale: boolean, keepFor: number): Promise<void> {
    const at = this.clock();
    const until = performance.now() + keepFor;
    const stamp: TagStamp = stale ? { hard: 0, stale: at } : { hard: at, stale: 0 };
    for (const tag of tags) this.stamps.set(tag, { stamp: laterStamp(this.known(tag), stamp), until });
    if (this.stamps.size > this.pruneAt) this.prune();
  }

  close(): void {
    this.stamps.clear();
  }

  private prune(): void {
    const now = performance.now();
    for (const [tag, held] of this.stamps) if (held.until <= now) this.stamps.delete(tag);
    this.pruneAt = Math.max(PRUNE_AT, this.stamps.size * 2);
  }
}
