/**
 * The demo's Express app: one slow endpoint (a report that needs a database query), served
 * three ways so the herds can be compared side by side.
 *
 *   GET /none/report?run=…    no protection: every request queries the database
 *   GET /local/report?run=…   dogpileGuard() on the embedded default cache (this process)
 *   GET /shared/report?run=…  dogpileGuard({ cache }) on a cache that uses Redis, when given
 *
 * `run` is a fresh value for every herd, so each herd starts on a cold key.
 */
import express, { type Express, type RequestHandler } from 'express';
import type { DogpileCache } from 'dogpile-guard';
import { dogpileGuard } from 'dogpile-guard/express';
import type { FakeDatabase } from './fake-db.js';

export type RouteName = 'none' | 'local' | 'shared';

export const REPORT_TTL = '30s';

export function createDemoApp(db: FakeDatabase, sharedCache?: DogpileCache): Express {
  const app = express();
  app.disable('x-powered-by');

  const report =
    (route: RouteName): RequestHandler =>
    async (req, res) => {
      const rows = await db.query(route, () => [
        { region: 'north', orders: 1289, revenue: 48_210.5 },
        { region: 'south', orders: 977, revenue: 35_904.25 },
      ]);
      res.json({ report: 'daily-sales', run: req.query.run ?? null, computedAt: new Date().toISOString(), pid: process.pid, rows });
    };

  app.get('/none/report', report('none'));
  // The embedded default: no cache given, so the guard uses the in-process default cache.
  app.get('/local/report', dogpileGuard({ ttl: REPORT_TTL }), report('local'));
  if (sharedCache) app.get('/shared/report', dogpileGuard({ cache: sharedCache, ttl: REPORT_TTL }), report('shared'));
  return app;
}
