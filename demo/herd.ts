/**
 * The herd: `count` GET requests sent at once, spread round-robin over one or more servers,
 * each timed from the moment it is sent to the last byte of its response.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';

export interface Target {
  port: number;
  path: string;
  /**
   * The Host header to send (default: 127.0.0.1:port). Behind a load balancer every instance
   * sees the public host name; the multi-process demo sends one name to every worker, as a
   * load balancer would, because the host is part of the HTTP cache key.
   */
  host?: string;
}

export interface HerdResult {
  sent: number;
  ok: number;
  failed: number;
  /** First error messages (at most 3), for the report. */
  errors: string[];
  /** Latency of every answered request, ms, sorted. */
  latencies: number[];
  /** Counts of the X-Cache header values; requests without one count as `none`. */
  xCache: Record<string, number>;
  wallMs: number;
}

export interface HerdOptions {
  targets: Target[];
  count: number;
  agent: http.Agent;
  /** Called after each response (answered so far, total). */
  onProgress?: (done: number, total: number) => void;
}

function get(target: Target, agent: http.Agent): Promise<{ status: number; xCache: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: target.port, path: target.path, agent, headers: target.host ? { host: target.host } : {} }, (res) => {
      res.resume();
      res.on('error', reject);
      res.on('end', () => {
        const x = res.headers['x-cache'];
        resolve({ status: res.statusCode ?? 0, xCache: typeof x === 'string' ? x : undefined });
      });
    });
    req.on('error', reject);
  });
}

export async function fireHerd({ targets, count, agent, onProgress }: HerdOptions): Promise<HerdResult> {
  const result: HerdResult = { sent: count, ok: 0, failed: 0, errors: [], latencies: [], xCache: {}, wallMs: 0 };
  let done = 0;
  const started = performance.now();
  const one = async (i: number) => {
    const target = targets[i % targets.length]!;
    const t0 = performance.now();
    try {
      const { status, xCache } = await get(target, agent);
      if (status !== 200) throw new Error(`HTTP ${status}`);
      result.ok++;
      result.latencies.push(performance.now() - t0);
      const label = xCache ?? 'none';
      result.xCache[label] = (result.xCache[label] ?? 0) + 1;
    } catch (error) {
      result.failed++;
      if (result.errors.length < 3) result.errors.push((error as Error).message);
    } finally {
      done++;
      onProgress?.(done, count);
    }
  };
  // Every request is sent in this one synchronous loop: they all arrive together.
  await Promise.all(Array.from({ length: count }, (_, i) => one(i)));
  result.wallMs = performance.now() - started;
  result.latencies.sort((a, b) => a - b);
  return result;
}

/** The `p`-th percentile (nearest rank) of sorted values; NaN when there are none. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}
