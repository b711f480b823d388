/**
 * The web-standard adapters on real apps over real sockets: Hono on `@hono/node-server`, Koa,
 * and a plain `fetch` handler served by Node, each through the shared suite.
 */
import { webAdapterSuite } from './support/web-suite.js';
import { WEB_FRAMEWORKS } from './fixtures/web-apps.js';

for (const framework of WEB_FRAMEWORKS) webAdapterSuite(framework);
