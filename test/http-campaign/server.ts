/**
 * A campaign app process: `node --import tsx test/http-campaign/server.ts '{"adapters":[...],"redisUrl":"...","headAware":false,"runLog":"..."}'`
 * starts every named adapter's app, behind the guard on that Redis (or bare without
 * `redisUrl`), appends each handler run of a guarded app to `runLog` (a file of JSON lines),
 * prints `{"event":"listening","ports":{...}}`, answers
 * `{"cmd":"invalidate","id":N,"adapter":"...","tags":[...]}` with `{"event":"invalidated","id":N,"error"?:"..."}`
 * once that adapter's cache has invalidated them (or failed to), and exits on `{"cmd":"exit"}`.
 */
import { fail, onCommands, send } from '../fixtures/child-io.js';
import { reading, runLog, startApps, type Adapter } from './apps.js';

const { adapters, redisUrl, headAware, runLog: file } = JSON.parse(process.argv[2] ?? '{}') as { adapters: Adapter[]; redisUrl?: string; headAware?: boolean; runLog?: string };
reading.headAware = headAware === true;
runLog.file = file;
const apps = await startApps(adapters, redisUrl).catch(fail);
send({ event: 'listening', ports: apps.ports });

async function invalidate(id: unknown, adapter: Adapter, tags: string[]): Promise<void> {
  try {
    const cache = apps.caches[adapter];
    if (!cache) throw new TypeError(`no guarded ${adapter} app`);
    await cache.invalidateTags(tags);
    send({ event: 'invalidated', id });
  } catch (error) {
    send({ event: 'invalidated', id, error: String(error) });
  }
}

onCommands(async (command) => {
  // Not queued behind the other commands: answered when the invalidation resolves or fails.
  if (command.cmd === 'invalidate') void invalidate(command.id, command.adapter as Adapter, command.tags as string[]);
  if (command.cmd === 'exit') {
    await apps.close();
    process.exit(0);
  }
});
