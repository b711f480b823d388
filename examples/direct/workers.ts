/**
 * Starts several worker processes (worker.ts) and has them all ask for the same report at
 * the same moment. With REDIS_URL the report is built once across all of them; without it,
 * each process has its own in-process cache and builds it once per process.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 node --import tsx examples/direct/workers.ts
 *   WORKERS=8 REDIS_URL=redis://127.0.0.1:6379 node --import tsx examples/direct/workers.ts
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';

interface Done {
  type: 'done';
  pid: number;
  ranLoader: boolean;
  builtBy: number;
}

const count = Number(process.env.WORKERS ?? 4);
if (!Number.isInteger(count) || count < 2) {
  console.error(`WORKERS must be a whole number of at least 2, got ${process.env.WORKERS}`);
  process.exit(1);
}
// A fresh key for every run, so it starts cold.
const key = `report:example-${randomUUID()}`;
const script = fileURLToPath(new URL('./worker.ts', import.meta.url));

const children: ChildProcess[] = [];
const ready: Promise<void>[] = [];
const done: Promise<Done>[] = [];
for (let i = 0; i < count; i++) {
  // fork() runs the child with this process's Node options (--import tsx included).
  const child = fork(script, [], { env: { ...process.env, REPORT_KEY: key } });
  children.push(child);
  ready.push(
    new Promise((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`worker ${child.pid} exited with code ${code} before it was ready`)));
    }),
  );
  done.push(
    new Promise((resolve, reject) => {
      child.on('message', (message: Done | { type: 'ready' }) => {
        if (message.type === 'done') resolve(message);
      });
      child.once('exit', (code) => reject(new Error(`worker ${child.pid} exited with code ${code} before it had the report`)));
    }),
  );
}
const stopAll = () => children.forEach((c) => c.kill('SIGTERM'));
process.once('SIGINT', stopAll);
process.once('SIGTERM', stopAll);

let results: Done[];
try {
  await Promise.all(ready);
  console.log(`${count} workers ready; all of them ask for ${key} now`);
  for (const child of children) child.send('go');
  results = await Promise.all(done);
} catch (error) {
  console.error((error as Error).message);
  stopAll();
  process.exit(1);
}
const builders = results.filter((r) => r.ranLoader).length;
const times = builders === 1 ? 'once' : `${builders} times`;
if (process.env.REDIS_URL) {
  console.log(`the report was built ${times} across ${count} worker processes (shared through Redis)`);
} else {
  console.log(`the report was built ${times} across ${count} worker processes: without REDIS_URL each process has its own cache`);
  console.log('set REDIS_URL=redis://... to share one cache, and it is built once');
}
