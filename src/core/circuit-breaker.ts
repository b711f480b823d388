import { monotonicNow } from '../shared/clock.js';

/**
 * Open for `cooldown` ms after a failure: while open, callers skip the protected resource
 * instead of waiting for it to fail again. Deadlines are on the monotonic clock.
 */
export class CircuitBreaker {
  private openUntil = 0;

  constructor(private readonly cooldown: number) {}

  /** True while the breaker is open (a failure was recorded less than `cooldown` ago). */
  isOpen(): boolean {
    return monotonicNow() < this.openUntil;
  }

  /** Records a failure: opens the breaker for `cooldown` from now. */
  trip(): void {
    this.openUntil = monotonicNow() + this.cooldown;
  }
}
