/**
 * An app under benchmark in its own Node process (run with tsx), the plain HTTP client and
 * the autocannon hit measurement the HTTP and NestJS benchmarks share.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Spawns `node --import tsx <script> ...args`; `ready` resolves with the port from the
 * child's `listening <port>` line. `stop()` ends its stdin (the app closes and exits) and
 * kills it if it has not exited in 10 s.
 */
export class AppProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  readonly ready: Promise<number>;
  private stderr = '';

  constructor(
    readonly label: string,
    script: string,
    args: string[],
  ) {
    this.child = spawn(process.execPath, ['--import', 'tsx', path.join('bench', script), ...args], {
      cwd: root,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
    this.child.stderr!.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-4000);
    });
    this.ready = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${label}: no "listening" in 60 s: ${this.stderr}`)), 60_000);
      createInterface({ input: this.child.stdout! }).on('line', (line) => {
        if (!line.startsWith('listening ')) return;
        clearTimeout(timer);
        resolve(Number(line.split(' ')[1]));
      });
      void this.exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`${label} exited (${code}): ${this.stderr}`));
      });
    });
    this.ready.catch(() => {});
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.stdin!.end();
    const code = await Promise.race([this.exited, sleep(10_000).then(() => 'timeout' as const)]);
    if (code === 'timeout') {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}

export interface Reply {
  status: number;
  body: string;
  xCache: string | undefined;
  ms: number;
}

/** One GET on 127.0.0.1, timed from the call to the last byte. */
export function request(port: number, urlPath: string, options: { agent?: http.Agent | false; host?: string } = {}): Promise<Reply> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: urlPath, agent: options.agent ?? false, headers: options.host ? { host: options.host } : {} },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, xCache: res.headers['x-cache'] as string | undefined, ms: performance.now() - t0 }));
        res.on('error', reject);
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end();
  });
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
  return (JSON.parse((await request(port, '/cpu', { host })).body) as { micros: number }).micros;
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
