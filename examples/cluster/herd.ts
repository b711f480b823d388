/**
 * Sends a herd of concurrent requests for one URL to the cluster example and reports what
 * happened: the X-Cache outcomes, how the requests spread over the workers, and how many
 * database queries the whole cluster ran (from its /stats).
 *
 *   node --import tsx examples/cluster/herd.ts http://127.0.0.1:3000/products/42 [requests=100]
 */
import http from 'node:http';

const target = new URL(process.argv[2] ?? 'http://127.0.0.1:3000/products/42');
const count = Number(process.argv[3] ?? 100);

interface Stats {
  workers: number;
  requests: Record<string, number>;
  dbQueries: Record<string, number>;
  dbQueriesTotal: number;
}

// One connection per request (no keep-alive): the cluster hands each one to a worker in turn.
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });

function get(url: URL): Promise<{ status: number; xCache: string; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, xCache: String(res.headers['x-cache'] ?? 'none'), body }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

let before: Stats;
try {
  before = JSON.parse((await get(new URL('/stats', target))).body) as Stats;
} catch (error) {
  console.error(`cannot get ${new URL('/stats', target).href} (${(error as Error).message}): is examples/cluster/server.ts running there?`);
  process.exit(1);
}
const replies = await Promise.all(Array.from({ length: count }, () => get(target)));
const after = JSON.parse((await get(new URL('/stats', target))).body) as Stats;
agent.destroy();

const outcomes: Record<string, number> = { MISS: 0, COALESCED: 0, HIT: 0 };
for (const r of replies) outcomes[r.xCache] = (outcomes[r.xCache] ?? 0) + 1;
const failed = replies.filter((r) => r.status !== 200).length;
const delta = (a: Record<string, number>, b: Record<string, number>) =>
  Object.keys(b)
    .map((id) => [id, (b[id] ?? 0) - (a[id] ?? 0)] as const)
    .filter(([, n]) => n > 0);
const perWorker = delta(before.requests, after.requests).map(([id, n]) => `worker ${id}: ${n}`);
const queries = after.dbQueriesTotal - before.dbQueriesTotal;
const queriedBy = delta(before.dbQueries, after.dbQueries).map(([id]) => `worker ${id}`);

console.log(`${count} concurrent requests for ${target.pathname}${failed ? ` (${failed} failed)` : ''}`);
console.log(`  X-Cache:            ${Object.entries(outcomes).map(([k, n]) => `${k} ${n}`).join(', ')}`);
console.log(`  answered by:        ${perWorker.length} of ${after.workers} workers (${perWorker.join(', ')})`);
console.log(`  database queries:   ${queries}${queriedBy.length ? ` (by ${queriedBy.join(', ')})` : ''}`);
