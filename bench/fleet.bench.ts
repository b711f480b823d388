/**
 * The fleet curve: one cold key, 50 callers per process, in 1, 2, 4, … 64 processes on one
 * Redis. For dogpile-guard and the in-process peers (bentocache, async-cache-dedupe,
 * cache-manager), how many times the loader runs and each caller's p99 wait beyond the loader,
 * as the fleet grows: does "one run per process" stay cheap when there are many processes?
 *
 * The processes are the core benchmark's workers (`bench/scenarios/core.ts`, contenders
 * configured there) and each stampede is `runStampede` of `bench/core.bench.ts`: a fresh
 * contender in every process, warmed up on another key, then every caller of every process at
 * one agreed moment, Redis commands counted in the window. The fleet grows as the sizes do
 * (the processes of a smaller size are reused by the larger ones), so 64 processes are started
 * once. A full `npm run bench` draws `docs/fleet.svg` from the table it wrote into RESULTS.md;
 * after a partial run, copy its section into RESULTS.md and run `node --import tsx
 * bench/fleet.bench.ts` to redraw it.
 *
 *   npm run bench -- fleet                       3 rounds per size (about 6 minutes)
 *   BENCH_QUICK=1 npm run bench -- fleet         1 round per size, up to 16 processes
 *   FLEET_BENCH_SIZES=1,4,16 npm run bench -- fleet
 */
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { JsonChild } from '../tools/child-process.js';
import { Fleet } from '../tools/fleet/fleet.js';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { CommandCounter, LOADER_MS, runStampede, type StampedeContender, type StampedeRun } from './core.bench.js';
import { median, percentile, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

const here = path.dirname(fileURLToPath(import.meta.url));

const SIZES = [1, 2, 4, 8, 16, 32, 64];
const QUICK_SIZES = [1, 2, 4, 8, 16];
const CALLERS = 50;

export interface FleetContender {
  id: StampedeContender;
  name: string;
  colour: string;
}

export const FLEET_CONTENDERS: FleetContender[] = [
  { id: 'dogpile', name: 'dogpile-guard', colour: '#1a7f37' },
  { id: 'bento', name: 'bentocache', colour: '#0969da' },
  { id: 'acd', name: 'async-cache-dedupe', colour: '#bf8700' },
  { id: 'cm', name: 'cache-manager', colour: '#8250df' },
];

/** One point of the curve: a contender at a fleet size, medians over the rounds. */
export interface FleetPoint {
  id: StampedeContender;
  processes: number;
  runs: number[];
  p99: number[];
  commands: number[];
  errors: number;
}

function sizesFrom(ctx: BenchContext): number[] {
  const env = process.env.FLEET_BENCH_SIZES;
  if (env) {
    const sizes = env.split(',').map(Number);
    if (sizes.some((n) => !Number.isInteger(n) || n < 1 || n > 256)) throw new RangeError(`FLEET_BENCH_SIZES: expected integers from 1 to 256, got ${env}`);
    return sizes.sort((a, b) => a - b);
  }
  return ctx.quick ? QUICK_SIZES : SIZES;
}

export default async function fleetBench(ctx: BenchContext): Promise<string> {
  const started = Date.now();
  const load = os.loadavg()[0]!;
  const sizes = sizesFrom(ctx);
  const rounds = ctx.quick ? 1 : 3;
  const redis: RedisServer = await startRedis();
  const fleets: Fleet[] = [];
  const members: JsonChild[] = [];
  const control = redis.client();
  let counter: CommandCounter | undefined;
  const points = new Map<string, FleetPoint>();
  const startup: string[] = [];
  try {
    counter = await CommandCounter.open(control);
    for (const size of sizes) {
      if (members.length < size) {
        const t0 = Date.now();
        // One fleet per step, its processes kept for the larger sizes.
        const more = await Fleet.start('bench/scenarios/core.ts', size - members.length, { url: redis.url }, { nodeArgs: ['--expose-gc'], label: `fleet worker ${members.length}+`, readyTimeoutMs: 240_000 });
        fleets.push(more);
        members.push(...more.members);
        startup.push(`${size}: ${((Date.now() - t0) / 1000).toFixed(0)} s`);
        ctx.log(`${members.length} processes running (started ${size - (members.length - more.members.length)} more in ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
      }
      for (let round = 0; round < rounds; round++) {
        // Each round rotates the order, so that no contender always runs first after a fleet grew.
        const order = FLEET_CONTENDERS.map((_, i) => FLEET_CONTENDERS[(i + round + size) % FLEET_CONTENDERS.length]!);
        for (const c of order) {
          const run: StampedeRun = await runStampede(members, control, counter, c.id, { id: `F${size}`, processes: size, callers: CALLERS }, round);
          const id = `${c.id}:${size}`;
          const point = points.get(id) ?? { id: c.id, processes: size, runs: [], p99: [], commands: [], errors: 0 };
          point.runs.push(run.loaderRuns);
          point.p99.push(percentile(run.excess, 99));
          point.commands.push(run.commands.client + run.commands.inScripts);
          point.errors += run.errors;
          points.set(id, point);
          ctx.log(
            `${size} × ${CALLERS} ${c.id} #${round + 1}: ${run.loaderRuns} loader runs, p99 +${percentile(run.excess, 99).toFixed(1)} ms, ` +
              `${run.commands.client} commands (+${run.commands.inScripts} in scripts), start skew ${run.startSkew.toFixed(1)} ms${run.errors ? `, ${run.errors} errors: ${run.errorSamples[0]}` : ''}`,
          );
        }
      }
    }
  } finally {
    counter?.close();
    await Promise.all(fleets.map((f) => f.close()));
    control.disconnect();
    await redis.stop();
  }
  const list = [...points.values()];
  // The chart is drawn from RESULTS.md once a full run wrote it (bench/run.ts), never from a partial run.
  return report(list, sizes, rounds, { seconds: (Date.now() - started) / 1000, load: [load, os.loadavg()[0]!], startup, quick: ctx.quick });
}

function report(points: FleetPoint[], sizes: number[], rounds: number, run: { seconds: number; load: number[]; startup: string[]; quick: boolean }): string {
  const at = (id: string, size: number) => points.find((p) => p.id === id && p.processes === size);
  const out: string[] = [];
  out.push('## The fleet curve: one cold key, 50 callers per process, 1 to 64 processes (`bench/fleet.bench.ts`)');
  if (sizes[sizes.length - 1] !== 64) out.push('', `This run measured ${sizes.join(', ')} processes only.`);
  out.push('');
  out.push(
    `\`npm run bench -- fleet\`${run.quick ? ' (BENCH_QUICK=1)' : ''}: ${rounds} round(s) per fleet size, the contenders in a rotated order in each; medians over the rounds with min–max in brackets. ` +
      `It took ${run.seconds.toFixed(0)} s; 1-minute load average ${run.load[0]!.toFixed(1)} at the start and ${run.load[1]!.toFixed(1)} at the end on ${os.cpus().length} CPUs. ` +
      `Each stampede is the core benchmark's (\`runStampede\`, the same worker processes and contender configurations as Stampede A): a fresh contender in every process, ` +
      `warmed up on another key, then ${CALLERS} callers per process at one agreed moment on a cold key, a ${LOADER_MS} ms loader, its runs counted with \`INCR\`. ` +
      '*p99 excess* is the 99th percentile over every caller of the fleet of its latency minus the loader\'s 100 ms. *Redis commands* are every command the contender sent, ' +
      'plus those its Lua scripts ran (INFO commandstats, see the core section). All processes share one machine: beyond a few processes they queue for its CPUs, ' +
      'which is what the p99 column shows at the right end, for every contender alike.',
  );
  out.push('');
  out.push(`| processes | ${FLEET_CONTENDERS.map((c) => `${c.name}: loader runs | p99 excess (ms) | Redis commands`).join(' | ')} |`);
  out.push(`|---:|${FLEET_CONTENDERS.map(() => '---:|---:|---:').join('|')}|`);
  for (const size of sizes) {
    const cells = FLEET_CONTENDERS.map((c) => {
      const p = at(c.id, size);
      if (!p) return '— | — | —';
      return `${summary(p.runs, 0)} | ${summary(p.p99, 1)} | ${summary(p.commands, 0)}${p.errors ? ` (${p.errors} errors)` : ''}`;
    });
    out.push(`| ${size} | ${cells.join(' | ')} |`);
  }
  out.push('');
  const biggest = sizes[sizes.length - 1]!;
  const ours = at('dogpile', biggest);
  const peers = FLEET_CONTENDERS.filter((c) => c.id !== 'dogpile').map((c) => `${c.name} ${median(at(c.id, biggest)?.runs ?? [Number.NaN])}`);
  out.push(
    `At ${biggest} processes dogpile-guard ran the loader ${ours ? median(ours.runs) : 'n/a'} time(s); the in-process peers ${peers.join(', ')}: ` +
      'one run per process, so the origin sees as many requests as there are processes. The chart is [docs/fleet.svg](../docs/fleet.svg).',
  );
  return out.join('\n');
}

function escape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * Two panels over the fleet size (log scale, base 2): loader runs (log scale) and the callers'
 * p99 wait beyond the loader; one line per contender, the medians as points.
 */
export function renderFleetChart(points: FleetPoint[], sizes: number[], rounds: number): string {
  const panelW = 360;
  const panelH = 240;
  const left = 70;
  const gap = 90;
  const top = 110;
  const width = left + 2 * panelW + gap + 40;
  const height = top + panelH + 130;
  const maxSize = Math.max(...sizes);
  const xOf = (n: number) => (maxSize === 1 ? 0 : (Math.log2(n) / Math.log2(maxSize)) * panelW);
  const runsMax = Math.max(2, ...points.map((p) => median(p.runs)));
  const runsTop = 2 ** Math.ceil(Math.log2(runsMax));
  const p99Max = Math.max(1, ...points.map((p) => median(p.p99)));
  const p99Step = niceStep(p99Max / 4);
  const p99Top = Math.ceil(p99Max / p99Step) * p99Step;
  const panels = [
    { title: 'loader runs (origin requests), log scale', y: (v: number) => panelH - (Math.log2(Math.max(1, v)) / Math.log2(runsTop)) * panelH, value: (p: FleetPoint) => median(p.runs), ticks: ticksLog(runsTop), fmt: (v: number) => String(v) },
    { title: 'caller p99 beyond the loader (ms)', y: (v: number) => panelH - (v / p99Top) * panelH, value: (p: FleetPoint) => median(p.p99), ticks: Array.from({ length: Math.round(p99Top / p99Step) + 1 }, (_, i) => i * p99Step), fmt: (v: number) => (v >= 10 ? v.toFixed(0) : v.toFixed(1)) },
  ];
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="-apple-system, BlinkMacSystemFont, 'Segoe UI', Helvetica, Arial, sans-serif" font-size="13" role="img" aria-labelledby="title desc">`);
  out.push('<title id="title">The fleet curve: loader runs and caller p99 for one cold key as the number of processes grows</title>');
  out.push(
    `<desc id="desc">${escape(
      `One cold key, 50 callers per process, ${sizes.join(', ')} processes on one Redis, medians of ${rounds} round(s). ` +
        FLEET_CONTENDERS.map((c) => `${c.name}: ${sizes.map((n) => { const p = points.find((q) => q.id === c.id && q.processes === n); return p ? `${n} processes ${median(p.runs)} runs, p99 ${median(p.p99).toFixed(1)} ms` : ''; }).filter(Boolean).join('; ')}`).join('. '),
    )}</desc>`,
  );
  out.push(`<rect x="0.5" y="0.5" width="${width - 1}" height="${height - 1}" rx="10" fill="#ffffff" stroke="#d0d7de"/>`);
  out.push(`<text x="20" y="30" font-size="17" font-weight="bold" fill="#1f2328">One cold key, 50 callers per process, 1 to ${maxSize} processes on one Redis</text>`);
  out.push(`<text x="20" y="52" fill="#57606a">measured by bench/fleet.bench.ts (npm run bench -- fleet), medians of ${rounds} round(s); the loader takes 100 ms;</text>`);
  out.push(`<text x="20" y="70" fill="#57606a">every process shares one 2-core machine, so the right-hand p99s are mostly processes queueing for a CPU</text>`);
  panels.forEach((panel, i) => {
    const x0 = left + i * (panelW + gap);
    out.push(`<text x="${x0}" y="${top - 14}" font-weight="bold" fill="#1f2328">${escape(panel.title)}</text>`);
    for (const t of panel.ticks) {
      const y = top + panel.y(t);
      out.push(`<line x1="${x0}" y1="${y.toFixed(1)}" x2="${x0 + panelW}" y2="${y.toFixed(1)}" stroke="#eaeef2"/>`);
      out.push(`<text x="${x0 - 8}" y="${(y + 4).toFixed(1)}" text-anchor="end" fill="#57606a">${escape(panel.fmt(t))}</text>`);
    }
    out.push(`<line x1="${x0}" y1="${top}" x2="${x0}" y2="${top + panelH}" stroke="#8c959f"/>`);
    out.push(`<line x1="${x0}" y1="${top + panelH}" x2="${x0 + panelW}" y2="${top + panelH}" stroke="#8c959f"/>`);
    for (const n of sizes) {
      const x = x0 + xOf(n);
      out.push(`<text x="${x.toFixed(1)}" y="${top + panelH + 18}" text-anchor="middle" fill="#57606a">${n}</text>`);
    }
    out.push(`<text x="${x0 + panelW / 2}" y="${top + panelH + 38}" text-anchor="middle" fill="#57606a">processes (log scale)</text>`);
    for (const c of FLEET_CONTENDERS) {
      const line = sizes
        .map((n) => points.find((p) => p.id === c.id && p.processes === n))
        .filter((p): p is FleetPoint => p !== undefined)
        .map((p) => [x0 + xOf(p.processes), top + panel.y(panel.value(p))] as const);
      if (line.length === 0) continue;
      const ours = c.id === 'dogpile';
      out.push(`<polyline fill="none" stroke="${c.colour}" stroke-width="${ours ? 3 : 2}" points="${line.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ')}"/>`);
      for (const [x, y] of line) out.push(`<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="${ours ? 4 : 3}" fill="${c.colour}"/>`);
    }
  });
  const legendY = height - 26;
  let x = 20;
  FLEET_CONTENDERS.forEach((c) => {
    const label = `${c.name}${c.id === 'dogpile' ? '' : ' (in-process)'}`;
    out.push(`<rect x="${x}" y="${legendY - 10}" width="14" height="14" rx="2" fill="${c.colour}"/>`);
    out.push(`<text x="${x + 20}" y="${legendY + 2}" fill="#1f2328"${c.id === 'dogpile' ? ' font-weight="bold"' : ''}>${escape(label)}</text>`);
    x += 44 + label.length * 7.2;
  });
  out.push(`<text x="20" y="${legendY - 24}" fill="#57606a">Where the in-process peers' loader runs are equal (one per process) their lines lie on top of each other.</text>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** 1, 2 or 5 times a power of ten, the smallest at least `raw`. */
function niceStep(raw: number): number {
  const power = 10 ** Math.floor(Math.log10(Math.max(raw, 1e-9)));
  return [1, 2, 5, 10].map((m) => m * power).find((v) => v >= raw) ?? 10 * power;
}

/** Powers of two from 1 to `top`, at most 7 of them. */
function ticksLog(top: number): number[] {
  const ticks: number[] = [];
  const step = Math.max(1, Math.ceil(Math.log2(top) / 6));
  for (let e = 0; 2 ** e <= top; e += step) ticks.push(2 ** e);
  return ticks;
}

/** The points of the fleet table of a RESULTS.md (its medians), to redraw the chart without a run. */
export function readFleetPoints(markdown: string): { points: FleetPoint[]; sizes: number[]; rounds: number } {
  const start = markdown.indexOf('## The fleet curve');
  if (start === -1) throw new Error('RESULTS.md has no fleet section; run `npm run bench -- fleet` and copy its section in');
  const lines = markdown.slice(start).split('\n');
  const header = lines.findIndex((l) => l.startsWith('| processes'));
  if (header === -1) throw new Error('the fleet section has no table');
  const rounds = Number(/(\d+) round\(s\) per fleet size/.exec(markdown.slice(start))?.[1] ?? 1);
  const value = (cell: string) => Number(cell.trim().split(' ')[0]);
  const points: FleetPoint[] = [];
  const sizes: number[] = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line.split('|').slice(1, -1);
    const size = value(cells[0]!);
    sizes.push(size);
    FLEET_CONTENDERS.forEach((c, i) => {
      const [runs, p99, commands] = [cells[1 + 3 * i]!, cells[2 + 3 * i]!, cells[3 + 3 * i]!].map(value);
      if (![runs, p99, commands].some(Number.isNaN)) points.push({ id: c.id, processes: size, runs: [runs!], p99: [p99!], commands: [commands!], errors: 0 });
    });
  }
  return { points, sizes, rounds };
}

/** Draws docs/fleet.svg from the fleet table of bench/RESULTS.md; returns the file. */
export function writeFleetChart(): string {
  const { points, sizes, rounds } = readFleetPoints(readFileSync(path.join(here, 'RESULTS.md'), 'utf8'));
  const file = path.join(here, '..', 'docs', 'fleet.svg');
  writeFileSync(file, renderFleetChart(points, sizes, rounds));
  return file;
}

// `node --import tsx bench/fleet.bench.ts`: redraws docs/fleet.svg from the table in bench/RESULTS.md.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  process.stdout.write(`wrote ${path.relative(process.cwd(), writeFleetChart())}\n`);
}
