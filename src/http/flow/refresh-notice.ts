import { FRESHNESS_DEFAULTS, type FreshnessRules } from '../../core/freshness.js';
import { warn } from '../../shared/diagnostics.js';
import { responseFreshness } from '../rules/freshness.js';
import type { HttpGuard } from './guard.js';
import { routeWindow } from '../rules/freshness.js';

/**
 * Says once, for an adapter that can refresh in the background only when given a way to replay
 * requests (Hono's `app`) and was not given one, that its stale responses are refreshed in the
 * foreground: as soon as a stale window is known (the guard's own or its cache's, else the first
 * stored response that grants one). Nothing is said when there is nothing to say: a replay is
 * there, or `refresh: 'foreground'` asks for exactly that.
 */
export class ForegroundRefreshNotice {
  private said: boolean;

  constructor(
    private readonly guard: HttpGuard<never>,
    private readonly code: string,
    private readonly message: (source: string) => string,
    quiet: boolean,
  ) {
    this.said = quiet || guard.options.refresh === 'foreground';
    // The cache given is known now; the default cache only at the first request (`check`).
    const given = guard.options.cache;
    if (given !== undefined) this.window(given.options.freshness);
    else if (guard.options.freshness.staleWhileRevalidate !== undefined) this.window(FRESHNESS_DEFAULTS);
  }

  /** At each request: the window of the cache the guard uses. */
  check(): void {
    if (!this.said) this.window(this.guard.cache.options.freshness);
  }

  /** After a handler ran: the window its response grants, if it is stored. */
  checkResponse(status: number, headers: () => Readonly<Record<string, string>>): void {
    if (this.said) return;
    const { ttl, maxTtl, statuses } = this.guard.options;
    const freshness = responseFreshness(status, headers(), { now: Date.now(), defaultTtl: ttl, maxTtl, statuses });
    if (freshness.storable && (freshness.staleWhileRevalidate ?? 0) > 0) this.say("the response's stale-while-revalidate");
  }

  private window(rules: FreshnessRules): void {
    if (!this.said && routeWindow(this.guard.options.freshness, rules, 'staleWhileRevalidate') > 0) this.say('staleWhileRevalidate');
  }

  private say(source: string): void {
    this.said = true;
    warn(this.code, this.message(source));
  }
}
