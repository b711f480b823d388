/**
 * Draws the main panels of the Grafana dashboard (docs/grafana/dogpile-guard.json) from a real
 * run: a throwaway Redis, the bounded workload of tools/metrics-workload.ts, and a scrape of
 * the prom-client registry every SCRAPE_MS, read as Prometheus reads it (the text format).
 * Each panel is the dashboard's query computed over those scrapes, written as an SVG.
 *
 *   node --import tsx tools/grafana-panels.ts [out.svg]     # default docs/grafana/panels.svg
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { registerDogpileMetrics } from '../src/prometheus/index.js';
import { runWorkload } from './metrics-workload.js';
import { exposedSeries, type Scrape } from './promql-names.js';
import { RedisServer } from './redis-server.js';

const SCRAPE_MS = 100;
/** The rate window, as `[$__rate_interval]` in the dashboard. */
const WINDOW_MS = 600;

interface Series {
  label: string;
  color: string;
  points: [number, number][];
}

interface Panel {
  title: string;
  query: string;
  unit: string;
  series: Series[];
  max?: number;
}

const COLORS = ['#1a7f37', '#0969da', '#bf8700', '#8250df', '#cf222e', '#57606a'];

/** Rounds of the workload that took over a second (printed: they show in the panels as gaps). */
const slowRounds: string[] = [];

async function record(): Promise<{ scrapes: Scrape[]; frozen: [number, number] }> {
  const registry = new Registry();
  const metrics = registerDogpileMetrics({ registry });
  const server = await new RedisServer().start();
  const scrapes: Scrape[] = [];
  const start = performance.now();
  const at = () => (performance.now() - start) / 1000;
  const scrape = async () => scrapes.push({ t: at(), series: exposedSeries(await registry.metrics()) });
  let frozenFrom = -1;
  let frozenTo = -1;
  let timer: NodeJS.Timeout | undefined;
  let lastRound = 0;
  const tick = () => {
    timer = setTimeout(() => void scrape().then(tick), SCRAPE_MS);
  };
  try {
    await scrape();
    tick();
    await runWorkload({
      server,
      rounds: 20,
      freezeMs: 2_000,
      onRound: (phase) => {
        const now = at();
        if (now - lastRound > 1) slowRounds.push(`${phase} round ending at ${now.toFixed(1)} s took ${(now - lastRound).toFixed(1)} s`);
        lastRound = now;
      },
      onFreeze: (frozen) => {
        if (frozen) frozenFrom = at();
        else frozenTo = at();
      },
    });
  } finally {
    clearTimeout(timer);
    metrics.dispose();
    await server.stop();
  }
  await new Promise((r) => setTimeout(r, SCRAPE_MS));
  return { scrapes, frozen: [frozenFrom, frozenTo] };
}

/** Sum of the series of `name` whose labels match, at one scrape. */
function total(scrape: Scrape, name: string, match: (labels: Record<string, string>) => boolean = () => true): number {
  let sum = 0;
  for (const s of scrape.series) if (s.name === name && match(s.labels)) sum += s.value;
  return sum;
}

/** Per-second increase over WINDOW_MS ending at each scrape (as `rate()`). */
function rate(scrapes: Scrape[], value: (s: Scrape) => number): [number, number][] {
  const points: [number, number][] = [];
  for (let i = 0; i < scrapes.length; i++) {
    const now = scrapes[i]!;
    let j = i;
    while (j > 0 && now.t - scrapes[j - 1]!.t <= WINDOW_MS / 1000) j--;
    if (j === i) continue;
    const then = scrapes[j]!;
    points.push([now.t, (value(now) - value(then)) / (now.t - then.t)]);
  }
  return points;
}

/** histogram_quantile over the window, with Prometheus's linear interpolation in a bucket. */
function quantile(scrapes: Scrape[], name: string, q: number): [number, number][] {
  const points: [number, number][] = [];
  for (let i = 0; i < scrapes.length; i++) {
    const now = scrapes[i]!;
    let j = i;
    while (j > 0 && now.t - scrapes[j - 1]!.t <= WINDOW_MS / 1000) j--;
    if (j === i) continue;
    const buckets = new Map<number, number>();
    for (const [scrape, sign] of [[now, 1], [scrapes[j]!, -1]] as const) {
      for (const s of scrape.series) {
        if (s.name !== `${name}_bucket`) continue;
        const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
        buckets.set(le, (buckets.get(le) ?? 0) + sign * s.value);
      }
    }
    const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
    const count = sorted.at(-1)?.[1] ?? 0;
    if (count <= 0) continue;
    const rank = q * count;
    let lower = 0;
    let below = 0;
    for (const [le, cumulative] of sorted) {
      if (cumulative >= rank) {
        const upper = le === Infinity ? lower : le;
        points.push([now.t, lower + (upper - lower) * ((rank - below) / Math.max(cumulative - below, 1e-9))]);
        break;
      }
      lower = le;
      below = cumulative;
    }
  }
  return points;
}

function panels(scrapes: Scrape[]): Panel[] {
  const calls = 'dogpile_guard_calls_total';
  const outcomes = ['hit', 'miss', 'coalesced', 'stale', 'error'];
  const ratio = (of: string[]): [number, number][] => {
    const part = rate(scrapes, (s) => total(s, calls, (l) => of.includes(l.outcome!)));
    const all = rate(scrapes, (s) => total(s, calls));
    return part.flatMap(([t, v], i) => (all[i]![1] > 0 ? [[t, v / all[i]![1]] as [number, number]] : []));
  };
  const loaders = 'dogpile_guard_loader_duration_seconds_count';
  return [
    {
      title: 'Calls by outcome',
      query: 'sum by (outcome) (rate(dogpile_guard_calls_total[…]))',
      unit: 'calls/s',
      series: outcomes.map((o, i) => ({ label: o, color: COLORS[i]!, points: rate(scrapes, (s) => total(s, calls, (l) => l.outcome === o)) })),
    },
    {
      title: 'Hit ratio',
      query: 'hit+stale (and +coalesced) ÷ all calls',
      unit: '',
      max: 1,
      series: [
        { label: 'hit + stale', color: COLORS[0]!, points: ratio(['hit', 'stale']) },
        { label: '+ coalesced', color: COLORS[1]!, points: ratio(['hit', 'stale', 'coalesced']) },
      ],
    },
    {
      title: 'Loader runs',
      query: 'sum by (background, outcome) (rate(…loader_duration_seconds_count[…]))',
      unit: 'runs/s',
      series: [
        ['false', 'ok', 'caller ok'],
        ['false', 'error', 'caller error'],
        ['true', 'ok', 'refresh ok'],
        ['true', 'error', 'refresh error'],
      ].map(([bg, outcome, label], i) => ({ label: label!, color: COLORS[i]!, points: rate(scrapes, (s) => total(s, loaders, (l) => l.background === bg && l.outcome === outcome)) })),
    },
    {
      title: 'Loader and wait duration, p95',
      query: 'histogram_quantile(0.95, sum by (le) (rate(…_bucket[…])))',
      unit: 's',
      series: [
        { label: 'loader p95', color: COLORS[0]!, points: quantile(scrapes, 'dogpile_guard_loader_duration_seconds', 0.95) },
        { label: 'wait p95', color: COLORS[3]!, points: quantile(scrapes, 'dogpile_guard_wait_duration_seconds', 0.95) },
      ],
    },
    {
      title: 'Waits, refreshes, fail-safe',
      query: 'rates of …wait_duration_seconds_count, …refreshes_total, …fail_safe_total',
      unit: 'per s',
      series: [
        { label: 'waits', color: COLORS[3]!, points: rate(scrapes, (s) => total(s, 'dogpile_guard_wait_duration_seconds_count')) },
        { label: 'refresh ok', color: COLORS[0]!, points: rate(scrapes, (s) => total(s, 'dogpile_guard_refreshes_total', (l) => l.outcome === 'ok')) },
        { label: 'refresh error', color: COLORS[4]!, points: rate(scrapes, (s) => total(s, 'dogpile_guard_refreshes_total', (l) => l.outcome === 'error')) },
        { label: 'fail-safe', color: COLORS[2]!, points: rate(scrapes, (s) => total(s, 'dogpile_guard_fail_safe_total')) },
      ],
    },
    {
      title: 'Redis errors',
      query: 'sum by (operation) (rate(dogpile_guard_redis_errors_total[…]))',
      unit: 'errors/s',
      series: [...new Set(scrapes.flatMap((s) => s.series.filter((x) => x.name === 'dogpile_guard_redis_errors_total').map((x) => x.labels.operation!)))].sort().map((op, i) => ({
        label: op,
        color: COLORS[(i + 4) % COLORS.length]!,
        points: rate(scrapes, (s) => total(s, 'dogpile_guard_redis_errors_total', (l) => l.operation === op)),
      })),
    },
  ];
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fmt = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1).replace(/\.0$/, '') : v >= 1 ? v.toFixed(1).replace(/\.0$/, '') : v === 0 ? '0' : v.toPrecision(2));

function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function draw(all: Panel[], duration: number, frozen: [number, number]): string {
  const W = 900;
  const PW = 430;
  const PH = 190;
  const top = 80;
  const H = top + Math.ceil(all.length / 2) * (PH + 20) + 10;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="-apple-system, BlinkMacSystemFont, 'Segoe UI', Helvetica, Arial, sans-serif" role="img" aria-labelledby="title desc">`,
    `  <title id="title">dogpile-guard dashboard panels, drawn from a real scrape</title>`,
    `  <desc id="desc">The main panels of docs/grafana/dogpile-guard.json computed from prom-client scrapes (every ${SCRAPE_MS} ms) of a ${duration.toFixed(1)} s run of tools/metrics-workload.ts on a real Redis; the shaded band is the time Redis was frozen. Not a Grafana screenshot.</desc>`,
    `  <rect x="0.5" y="0.5" width="${W - 1}" height="${H - 1}" rx="12" fill="#ffffff" stroke="#d0d7de"/>`,
    `  <text x="20" y="30" font-size="17" font-weight="600" fill="#24292f">dogpile-guard: the dashboard's main panels over a real run</text>`,
    `  <text x="20" y="50" font-size="12" fill="#57606a">Drawn by tools/grafana-panels.ts from prom-client scrapes every ${SCRAPE_MS} ms (rates over ${WINDOW_MS} ms), not a Grafana screenshot.</text>`,
    `  <text x="20" y="64" font-size="12" fill="#57606a">Shaded: Redis frozen (SIGSTOP), ${(frozen[1] - frozen[0]).toFixed(1)} s; calls run their loaders in-process meanwhile.</text>`,
  );
  all.forEach((panel, index) => {
    const x0 = 20 + (index % 2) * (PW + 20);
    const y0 = top + Math.floor(index / 2) * (PH + 20);
    const px = x0 + 44;
    const pw = PW - 56;
    const py = y0 + 46;
    const ph = PH - 82;
    const max = panel.max ?? niceMax(Math.max(0, ...panel.series.flatMap((s) => s.points.map((p) => p[1]))));
    const X = (t: number) => px + (t / duration) * pw;
    const Y = (v: number) => py + ph - (Math.min(v, max) / max) * ph;
    out.push(`  <g>`);
    out.push(`    <rect x="${x0}" y="${y0}" width="${PW}" height="${PH}" rx="6" fill="#f6f8fa" stroke="#d0d7de"/>`);
    out.push(`    <text x="${x0 + 10}" y="${y0 + 18}" font-size="13" font-weight="600" fill="#24292f">${esc(panel.title)}${panel.unit ? ` <tspan font-weight="400" fill="#57606a">(${esc(panel.unit)})</tspan>` : ''}</text>`);
    out.push(`    <text x="${x0 + 10}" y="${y0 + 30}" font-size="9" fill="#6e7781" font-family="ui-monospace, SFMono-Regular, Menlo, monospace">${esc(panel.query)}</text>`);
    if (frozen[0] >= 0 && frozen[1] > frozen[0]) out.push(`    <rect x="${X(frozen[0]).toFixed(1)}" y="${py}" width="${(X(frozen[1]) - X(frozen[0])).toFixed(1)}" height="${ph}" fill="#cf222e" fill-opacity="0.08"/>`);
    for (const f of [0, 0.5, 1]) {
      const y = Y(max * f);
      out.push(`    <line x1="${px}" y1="${y.toFixed(1)}" x2="${px + pw}" y2="${y.toFixed(1)}" stroke="#d0d7de" stroke-width="${f === 0 ? 1 : 0.5}"/>`);
      out.push(`    <text x="${px - 4}" y="${(y + 3).toFixed(1)}" font-size="9" fill="#57606a" text-anchor="end">${fmt(max * f)}</text>`);
    }
    for (let t = 0; t <= duration; t += duration > 8 ? 2 : 1) out.push(`    <text x="${X(t).toFixed(1)}" y="${py + ph + 12}" font-size="9" fill="#57606a" text-anchor="middle">${t}s</text>`);
    for (const s of panel.series) {
      if (s.points.length === 0) continue;
      // A line breaks where the series has no value (a ratio of no calls) rather than bridging it.
      const d = s.points.map(([t, v], i) => `${i === 0 || t - s.points[i - 1]![0] > (3 * SCRAPE_MS) / 1000 ? 'M' : 'L'}${X(t).toFixed(1)} ${Y(v).toFixed(1)}`).join('');
      out.push(`    <path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.5" stroke-linejoin="round"/>`);
    }
    let lx = px;
    for (const s of panel.series) {
      out.push(`    <rect x="${lx}" y="${y0 + PH - 16}" width="10" height="3" fill="${s.color}"/><text x="${lx + 13}" y="${y0 + PH - 12}" font-size="10" fill="#24292f">${esc(s.label)}</text>`);
      lx += 24 + s.label.length * 6;
    }
    out.push(`  </g>`);
  });
  out.push('</svg>', '');
  return out.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const target = path.resolve(process.argv[2] ?? path.join(root, 'docs', 'grafana', 'panels.svg'));
  const { scrapes, frozen } = await record();
  const duration = Math.ceil(scrapes.at(-1)!.t);
  writeFileSync(target, draw(panels(scrapes), duration, frozen));
  for (const line of slowRounds) console.log(line);
  console.log(`${scrapes.length} scrapes over ${scrapes.at(-1)!.t.toFixed(1)} s; Redis frozen ${frozen[0].toFixed(1)}–${frozen[1].toFixed(1)} s; wrote ${path.relative(root, target)}`);
}
