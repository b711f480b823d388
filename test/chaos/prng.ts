/**
 * A small seeded PRNG (mulberry32): the same seed gives the same numbers on every machine, so
 * a run's configuration, fault schedule and each worker's operations replay from the seed.
 */
export class Prng {
  private state: number;

  constructor(...seeds: number[]) {
    // Mix every part of the seed (run seed, worker, incarnation, loop) into one 32-bit state.
    let h = 0x9e3779b9;
    for (const s of seeds) {
      h = Math.imul(h ^ (s >>> 0), 0x85ebca6b);
      h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
      h ^= h >>> 16;
    }
    this.state = h >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** One of `weights`' keys, drawn with the given relative weights. */
  weighted<K extends string>(weights: Record<K, number>): K {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((sum, [, w]) => sum + w, 0);
    let roll = this.next() * total;
    for (const [k, w] of entries) {
      roll -= w;
      if (roll < 0) return k;
    }
    return entries[entries.length - 1]![0];
  }
}
