/**
 * A campaign app process: `node --import tsx test/http-campaign/server.ts '{"adapters":[...],"redisUrl":"...","headAware":false}'`
 * starts every named adapter's app, behind the guard on that Redis (or bare without
 * `redisUrl`), prints `{"event":"listening","ports":{...}}` and exits on `{"cmd":"exit"}`.
 */
import { fail, onCommands, send } from '../fixtures/child-io.js';
import { reading, startApps, type Adapter } from './apps.js';

const { adapters, redisUrl, headAware } = JSON.parse(process.argv[2] ?? '{}') as { adapters: Adapter[]; redisUrl?: string; headAware?: boolean };
reading.headAware = headAware === true;
const apps = await startApps(adapters, redisUrl).catch(fail);
send({ event: 'listening', ports: apps.ports });
onCommands(async (command) => {
  if (command.cmd === 'exit') {
    await apps.close();
    process.exit(0);
  }
});
