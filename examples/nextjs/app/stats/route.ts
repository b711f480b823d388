import { cacheKind, db } from '../../lib/cache';

export const dynamic = 'force-dynamic';

// Not wrapped: never cached.
export function GET(): Response {
  return Response.json({ dbQueries: db.queries, pid: process.pid, cache: cacheKind });
}
