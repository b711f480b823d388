/**
 * The monotonic clock every wait, deadline and timeout is measured on (never steps back or
 * jumps with the wall clock). `Date.now()` is only for timestamps that are stored or shown.
 */
export function monotonicNow(): number {
  return performance.now();
}

/**
 * This process's clock in ms since the epoch, carried on the monotonic clock (fractional, never
 * steps back): the store's clock when the store is in this process. It starts at the wall
 * clock of the process's start and does not follow later steps of it.
 */
export function processNow(): number {
  return TIME_ORIGIN + performance.now();
}

/** `performance.timeOrigin`, read once: it does not change, and its getter costs a hit about as much as the clock read. */
const TIME_ORIGIN = performance.timeOrigin;

/** The coarse clock's last reading, or 0 when it must be read again. */
let cachedNow = 0;
/** Readings served since the clock was last read. */
let served = 0;
const forget = () => {
  cachedNow = 0;
};

/**
 * The monotonic clock for the L1's hit check, read at most once per millisecond: a reading is
 * kept until a 1 ms timer drops it, or for 256 calls, whichever comes first. It is never ahead
 * of the clock; it lags by up to a millisecond, by longer only while the event loop is blocked
 * (when the L1's invalidation messages wait unread too). A clock read costs about as much as
 * two or three lookups of an lru-cache: a hit that read it every time ran at half the speed.
 */
export function coarseMonotonicNow(): number {
  if (cachedNow === 0 || ++served >= 256) {
    if (cachedNow === 0) setTimeout(forget, 1).unref();
    cachedNow = performance.now();
    served = 0;
  }
  return cachedNow;
}
