import { InvalidOptionError } from './errors.js';

/**
 * Refuses an options object with a field not in `known` (`InvalidOptionError` naming it, with
 * the closest known name when one is near: "unknown option tgas (did you mean tags?)").
 * `path` is put before every name in the message, e.g. `'l1.'` for the fields of `l1`.
 * Symbol-keyed fields are left alone (they are not options a user types).
 */
export function checkKnownOptions(options: object, known: ReadonlySet<string> | readonly string[], path = ''): void {
  for (const name of Object.keys(options)) {
    if (Array.isArray(known) ? known.includes(name) : (known as ReadonlySet<string>).has(name)) continue;
    const near = closest(name, known);
    const hint = near === undefined ? '' : ` (did you mean ${path}${near}?)`;
    throw new InvalidOptionError(`${path}${name}`, `unknown option ${path}${name}${hint}; known options are ${[...known].join(', ')}`);
  }
}

/**
 * The known name nearest to `name`: the same but for case, else the one at the smallest edit
 * distance (insertions, deletions, substitutions, swaps of neighbours), if that distance is
 * at most a third of the name's length (at least 1, at most 3).
 */
export function closest(name: string, known: Iterable<string>): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.min(3, Math.max(1, Math.floor(name.length / 3)));
  for (const candidate of known) {
    if (candidate.toLowerCase() === lower) return candidate;
    const d = editDistance(lower, candidate.toLowerCase());
    if (d <= bestDistance && (best === undefined || d < bestDistance)) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Optimal string alignment distance (Levenshtein plus swaps of two neighbouring characters). */
function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 3) return Number.POSITIVE_INFINITY;
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row: number[] = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}
