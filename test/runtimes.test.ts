/**
 * One fleet, several runtimes, one Redis: this process's Node, Bun and Deno (from the `bun` and
 * `deno` npm packages) and Node 26 (`node@26`; Node 20 when this is 26), each running the library's sources
 * (test/fixtures/runtimes/worker.ts). With default settings every process reads what any other
 * wrote: one loader run per cold key in total. Processes whose serializers cannot read each
 * other's entries do not overwrite them back and forth.
 *
 * The runtimes are fetched with `npx -y` the first time (about 15 s each on a fresh machine,
 * measured), hence the long first hook; nothing is fetched when they are cached.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonChild, killAllChildren, npxBinary, root, type Message } from '../tools/child-process.js';
import { useRedis } from './support/use-redis.js';
import { decodeEntry } from '../src/store/entry.js';
import { valueKey } from '../src/store/key.js';

const server = useRedis();
const worker = path.join(root, 'test/fixtures/runtimes/worker.ts');


const here = Number(process.versions.node.split('.')[0]);
/** The other end of the rolling upgrade: Node 26, or Node 20 when this process runs on 26. */
const otherMajor = here === 26 ? 20 : 26;
const binaries: { bun?: string; deno?: string; otherNode?: string } = {};

beforeAll(() => {
  binaries.bun = npxBinary('bun', 'bun');
  binaries.deno = npxBinary('deno', 'deno');
  binaries.otherNode = npxBinary(`node@${otherMajor}`, 'node');
}, 300_000);

afterAll(() => killAllChildren());

type Runtime = 'node' | 'otherNode' | 'bun' | 'deno';

async function start(runtime: Runtime, config: { serializer?: string; concurrency?: number; debug?: boolean } = {}): Promise<JsonChild> {
  const arg = JSON.stringify({ url: server.url, concurrency: config.concurrency ?? 10, serializer: config.serializer });
  let child: JsonChild;
  switch (runtime) {
    case 'node':
      child = new JsonChild(runtime, ['--import', 'tsx', worker, arg], config.debug ? { env: { ...process.env, NODE_DEBUG: 'dogpile-guard' } } : {});
      break;
    case 'otherNode':
      child = new JsonChild(`node${otherMajor}`, ['--import', 'tsx', worker, arg], { command: binaries.otherNode! });
      break;
    case 'bun':
      child = new JsonChild(runtime, [worker, arg], { command: binaries.bun! });
      break;
    case 'deno':
      // --sloppy-imports: the sources import './x.js' for './x.ts', as TypeScript's NodeNext wants.
      child = new JsonChild(runtime, ['run', '-A', '--sloppy-imports', worker, arg], { command: binaries.deno! });
      break;
  }
  const ready = await child.take('ready', 60_000);
  expect(ready.runtime).toBe(runtime === 'node' ? `node${here}` : runtime === 'otherNode' ? `node${otherMajor}` : runtime);
  return child;
}

/** Sends `go` for `key` to every child at once and returns their `done` messages. */
async function round(children: JsonChild[], key: string, loaderMs = 300): Promise<Message[]> {
  for (const child of children) child.send({ cmd: 'go', key, loaderMs });
  return Promise.all(children.map((child) => child.take('done', 60_000)));
}

async function runs(key: string): Promise<number> {
  return Number((await server.client().get(`${key}:runs`)) ?? 0);
}

describe('a fleet of Node, Bun and Deno processes with default settings', () => {
  it('runs the loader once per cold key in total, and every caller of every runtime gets the same value', async () => {
    const fleet = await Promise.all([start('node'), start('bun'), start('deno')]);
    try {
      for (let i = 0; i < 4; i++) {
        const key = `runtimes:cold:${i}`;
        const done = await round(fleet, key);
        expect(await runs(key)).toBe(1);
        const values = done.flatMap((d) => d.values as string[]);
        expect(values).toHaveLength(30);
        expect(new Set(values).size).toBe(1);
        // The value kept its types across runtimes (the canonical text names them).
        expect(values[0]).toContain('date:Date(2023-11-14T22:13:20.000Z)');
        expect(values[0]).toContain('big:12345678901234567890n');
        expect(values[0]).toContain('map:Map("a"=>1,"b"=>[2,3])');
        expect(values[0]).toContain('bytes:Buffer(0001feff)');
        expect(values[0]).toContain('floats:Float64Array(1.5,-2)');
        expect(values[0]).toContain('missing:undefined');
        expect(done.flatMap((d) => d.corrupt as string[])).toEqual([]);
        // A second round on the same key: hits everywhere, no new run.
        const again = await round(fleet, key, 0);
        expect(await runs(key)).toBe(1);
        expect(again.flatMap((d) => d.statuses as string[]).every((s) => s === 'hit')).toBe(true);
        expect(new Set(again.flatMap((d) => d.values as string[]))).toEqual(new Set([values[0]]));
      }
    } finally {
      await Promise.all(fleet.map((child) => child.exit()));
    }
  }, 180_000);
});

describe(`a rolling upgrade: Node ${here} and Node ${otherMajor} on one key`, () => {
  it('each reads what the other wrote (both directions), and a cold key runs once between them', async () => {
    const [old, next] = await Promise.all([start('node'), start('otherNode')]);
    try {
      for (const [writer, reader] of [
        [old, next],
        [next, old],
      ] as const) {
        const key = `runtimes:upgrade:${writer.label}`;
        const written = await round([writer], key);
        const read = await round([reader], key, 0);
        expect(await runs(key)).toBe(1);
        expect((read[0]!.statuses as string[]).every((s) => s === 'hit')).toBe(true);
        expect(read[0]!.values).toEqual(written[0]!.values);
        expect(read[0]!.corrupt).toEqual([]);
      }
      for (let i = 0; i < 3; i++) {
        const key = `runtimes:upgrade:both:${i}`;
        const done = await round([old, next], key);
        expect(await runs(key)).toBe(1);
        expect(new Set(done.flatMap((d) => d.values as string[])).size).toBe(1);
      }
    } finally {
      await Promise.all([old.exit(), next.exit()]);
    }
  }, 180_000);
});

describe('processes whose serializers cannot read each other', () => {
  it('leave a fresh entry they cannot read in place, report it once per key, and load for their own callers (no overwrite ping-pong)', async () => {
    const [left, right1, right2] = await Promise.all([start('node', { serializer: 'left' }), start('node', { serializer: 'right', debug: true }), start('node', { serializer: 'right' })]);
    const key = 'runtimes:mixed';
    const stored = async () => (await server.client().getBuffer(valueKey('dogpile', key)))!;
    try {
      const first = await round([left], key);
      expect(await runs(key)).toBe(1);
      const entry = await stored();
      expect(decodeEntry(entry).serializer).toBe('left');

      const corrupt: string[] = [];
      for (let i = 0; i < 4; i++) {
        const done = await round([left, right1, right2], key);
        const [l, r1, r2] = done;
        // The writer keeps reading its entry: it never had to load again.
        expect(l!.statuses).toEqual(Array(10).fill('hit'));
        expect(l!.values).toEqual(first[0]!.values);
        // The others answered their callers with a value of their own (one per process and round).
        for (const r of [r1!, r2!]) {
          expect(new Set(r.values as string[]).size).toBe(1);
          expect(r.values).not.toEqual(first[0]!.values);
        }
        corrupt.push(...(r1!.corrupt as string[]).map((c) => `right1 ${c}`), ...(r2!.corrupt as string[]).map((c) => `right2 ${c}`));
        // The entry in Redis is still the writer's, byte for byte.
        expect((await stored()).equals(entry)).toBe(true);
      }
      // One report per process and key, with its own error code.
      expect(corrupt.sort()).toEqual([`right1 ${key}: E_UNKNOWN_SERIALIZER`, `right2 ${key}: E_UNKNOWN_SERIALIZER`]);
      // One load for the writer, and at most one per round for the other serializer's two processes.
      expect(await runs(key)).toBeLessThanOrEqual(1 + 4 * 2);
      // The debug log names both serializers, once.
      expect(right1.stderr.match(/the entry was written with the "left" serializer, this process has "right"/g)).toHaveLength(1);
    } finally {
      await Promise.all([left.exit(), right1.exit(), right2.exit()]);
    }
  }, 120_000);

  it('a Bun process with v8Serializer (JavaScriptCore\'s format) and a Node one with v8Serializer do not overwrite each other', async () => {
    const [node, bun] = await Promise.all([start('node', { serializer: 'v8' }), start('bun', { serializer: 'v8' })]);
    const key = 'runtimes:v8-jsc';
    try {
      const first = await round([node], key);
      const entry = (await server.client().getBuffer(valueKey('dogpile', key)))!;
      expect(decodeEntry(entry).serializer).toBe('v8');
      for (let i = 0; i < 3; i++) {
        const [n, b] = await round([node, bun], key);
        expect(n!.statuses).toEqual(Array(10).fill('hit'));
        expect(n!.values).toEqual(first[0]!.values);
        expect(new Set(b!.values as string[]).size).toBe(1);
        expect((await server.client().getBuffer(valueKey('dogpile', key)))!.equals(entry)).toBe(true);
      }
    } finally {
      await Promise.all([node.exit(), bun.exit()]);
    }
  }, 120_000);
});
