/**
 * An app under benchmark in its own Node process (run with tsx) and the autocannon hit
 * measurement the HTTP and NestJS benchmarks share.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { NodeChild, root } from '../../tools/child-process.js';
import { fetchReply } from '../../tools/http-client.js';

/**
 * Spawns `node --import tsx bench/<script> ...args`; `ready` resolves with the port from the
 * child's `listening <port>` line. `endInput()` ends its stdin (the app closes and exits) and
 * kills it if it has not exited in 10 s.
 */
export class AppProcess extends NodeChild {
  readonly ready: Promise<number>;

  constructor(label: string, script: string, args: string[]) {
    super(label, ['--import', 'tsx', path.join(root, 'bench', script), ...args]);
    this.ready = this.waitFor((line) => line.startsWith('listening '), 60_000).then((line) => Number(line.split(' ')[1]));
    this.ready.catch(() => {});
  }
}

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p99: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
type Autocannon = (opts: { url: string; connections: number; duration: number; headers?: Record<string, string> }) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

export interface HitRun {
  rps: number;
  p99: number;
  /** CPU time the app process spent per request (µs): less sensitive than req/s to other load on the machine. */
  cpuPerRequest: number;
  bad: number;
}

/** The app's own CPU time so far (µs), from its `/cpu` route. */
async function cpuMicros(port: number, host: string | undefined): Promise<number> {
  return (JSON.parse((await fetchReply(port, '/cpu', { headers: host ? { host } : {} })).text) as { micros: number }).micros;
}

/** Hit throughput of `urlPath` with autocannon, and the app's CPU time per request. */
export async function measureHits(port: number, urlPath: string, options: { seconds: number; connections: number; host?: string }): Promise<HitRun> {
  const cpu0 = await cpuMicros(port, options.host);
  const result = await autocannon({
    url: `http://127.0.0.1:${port}${urlPath}`,
    connections: options.connections,
    duration: options.seconds,
    ...(options.host ? { headers: { host: options.host } } : {}),
  });
  const cpu1 = await cpuMicros(port, options.host);
  return {
    rps: result.requests.average,
    p99: result.latency.p99,
    cpuPerRequest: (cpu1 - cpu0) / Math.max(1, result.requests.total),
    bad: result.non2xx + result.errors + result.timeouts,
  };
}

/** Starts `server` listening on a free loopback port: its port, and a close that also drops keep-alive sockets. */
export async function listenNode(server: import('node:http').Server): Promise<{ port: number; close: () => Promise<void> }> {
  if (!server.listening) server.listen(0, '127.0.0.1');
  await new Promise((resolve) => (server.listening ? resolve(undefined) : server.once('listening', resolve)));
  const port = (server.address() as import('node:net').AddressInfo).port;
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return { port, close };
}

/**
 * The app side of `AppProcess`: prints `listening <port>`, then, once stdin ends, runs `close`
 * and exits.
 */
export function listenUntilStdinEnds(port: number, close: () => Promise<unknown>): void {
  process.stdout.write(`listening ${port}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => {
    void close().finally(() => process.exit(0));
  });
}
