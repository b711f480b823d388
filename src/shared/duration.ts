import { InvalidOptionError } from './errors.js';

/**
 * A duration: milliseconds as a number, or a string such as `'250ms'`, `'30s'`, `'5m'`,
 * `'1h'`, `'1d'` (decimals allowed: `'1.5s'`).
 */
export type Duration = number | `${number}` | `${number}${DurationUnit}` | `${number} ${DurationUnit}`;
export type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd';

/**
 * The longest duration accepted: 2^31 - 1 ms (about 24.8 days). Node runs a timer set for
 * longer after 1 ms, so a longer timeout would fire at once; every duration option and
 * argument is refused past it rather than cut to it.
 */
export const MAX_DURATION_MS = 2_147_483_647;

const UNIT_MS: Record<DurationUnit, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/;

/**
 * Parses a duration into whole milliseconds. Throws `InvalidOptionError` naming `option`
 * unless the result is a positive finite number (or zero when `allowZero`) of at most
 * `MAX_DURATION_MS`.
 */
export function toMs(value: unknown, option: string, { allowZero = false } = {}): number {
  let ms: number;
  if (typeof value === 'number') {
    ms = value;
  } else if (typeof value === 'string') {
    const m = PATTERN.exec(value);
    if (!m) {
      throw new InvalidOptionError(option, `${JSON.stringify(value)} is not a duration; use milliseconds or a string like '500ms', '30s', '5m', '1h'`);
    }
    ms = Number(m[1]) * UNIT_MS[(m[2] ?? 'ms') as DurationUnit];
  } else {
    throw new InvalidOptionError(option, `expected a number of milliseconds or a string like '30s', got ${describe(value)}`);
  }
  if (!Number.isFinite(ms)) throw new InvalidOptionError(option, `must be a finite number of milliseconds, got ${String(value)}`);
  if (ms < 0 || (ms === 0 && !allowZero)) {
    throw new InvalidOptionError(option, `must be ${allowZero ? 'zero or more' : 'greater than zero'}, got ${String(value)}`);
  }
  const whole = Math.ceil(ms);
  if (whole > MAX_DURATION_MS) {
    throw new InvalidOptionError(option, `must be at most ${MAX_DURATION_MS} ms (about 24.8 days: Node's timers cannot wait longer), got ${String(value)}`);
  }
  return whole;
}

/** True for a duration string `toMs` accepts with a positive result (cheap check for fast paths). */
export function isDuration(value: string): boolean {
  const m = PATTERN.exec(value);
  if (m === null) return false;
  const ms = Number(m[1]) * UNIT_MS[(m[2] ?? 'ms') as DurationUnit];
  return ms > 0 && Math.ceil(ms) <= MAX_DURATION_MS;
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number' && Number.isNaN(value)) return 'NaN';
  if (typeof value === 'string') return `the string ${JSON.stringify(value)}`;
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}
