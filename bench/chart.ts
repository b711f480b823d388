/**
 * Draws bench/stampede.svg from the "Stampede A" table of bench/RESULTS.md: loader runs and
 * each caller's p99 wait beyond the loader, per contender, on log scales (the peers span
 * three orders of magnitude). Run by `npm run bench` after RESULTS.md is written, or alone:
 * `node --import tsx bench/chart.ts`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

interface Row {
  name: string;
  runs: number;
  p99: number;
  ours: boolean;
}

/** The median in a cell like "7.9 [4.4–19.3]". */
function median(cell: string): number {
  return Number(cell.trim().split(' ')[0]);
}

export function readStampedeRows(markdown: string): Row[] {
  const start = markdown.indexOf('### Stampede A');
  if (start === -1) throw new Error('RESULTS.md has no "### Stampede A" table; run `npm run bench` first');
  const lines = markdown.slice(start).split('\n');
  const header = lines.find((l) => l.startsWith('| contender'));
  if (!header) throw new Error('the Stampede A table has no header row');
  const columns = header.split('|').map((c) => c.trim());
  const at = (name: string) => {
    const i = columns.findIndex((c) => c.startsWith(name));
    if (i === -1) throw new Error(`the Stampede A table has no "${name}" column`);
    return i;
  };
  const iRuns = at('loader runs');
  const iP99 = at('excess p99');
  const rows: Row[] = [];
  for (const line of lines.slice(lines.indexOf(header) + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line.split('|');
    const name = cells[1]!.trim().replace(/`/g, '').replace(/\s*\(.*\)\s*$/, '');
    rows.push({ name, runs: median(cells[iRuns]!), p99: Math.max(0.1, median(cells[iP99]!)), ours: name.startsWith('dogpile-guard') });
  }
  return rows;
}

function escape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function renderChart(rows: Row[]): string {
  const labelW = 300;
  const panelW = 300;
  const gap = 40;
  const rowH = 30;
  const top = 78;
  const width = labelW + 2 * panelW + gap + 30;
  const height = top + rows.length * rowH + 48;
  const panels = [
    { title: 'loader runs (log scale)', value: (r: Row) => r.runs, max: 1000, fmt: (v: number) => String(v) },
    { title: 'p99 wait beyond the loader, ms (log scale)', value: (r: Row) => r.p99, max: 10_000, fmt: (v: number) => (v >= 10 ? v.toFixed(0) : v.toFixed(1)) },
  ];
  const scale = (v: number, max: number) => (Math.log10(Math.max(1, v) ) / Math.log10(max)) * (panelW - 60);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="13">`);
  out.push(`<rect width="${width}" height="${height}" rx="10" fill="#ffffff" stroke="#d0d7de"/>`);
  out.push(`<text x="20" y="30" font-size="17" font-weight="bold" fill="#1f2328">Cold-key stampede: 4 processes × 50 callers, loader 100 ms, one Redis</text>`);
  out.push(`<text x="20" y="50" fill="#57606a">medians of bench/RESULTS.md (npm run bench); fewer runs and shorter waits are better</text>`);
  panels.forEach((panel, p) => {
    const x0 = labelW + p * (panelW + gap);
    out.push(`<text x="${x0}" y="${top - 8}" font-weight="bold" fill="#1f2328">${escape(panel.title)}</text>`);
    out.push(`<line x1="${x0}" y1="${top}" x2="${x0}" y2="${top + rows.length * rowH}" stroke="#8c959f"/>`);
    rows.forEach((r, i) => {
      const y = top + i * rowH + 6;
      const v = panel.value(r);
      const w = Math.max(2, scale(v, panel.max));
      out.push(`<rect x="${x0}" y="${y}" width="${w.toFixed(1)}" height="${rowH - 12}" rx="3" fill="${r.ours ? '#1a7f37' : '#8c959f'}"/>`);
      out.push(`<text x="${(x0 + w + 6).toFixed(1)}" y="${y + rowH - 17}" fill="#1f2328"${r.ours ? ' font-weight="bold"' : ''}>${escape(panel.fmt(v))}</text>`);
    });
  });
  rows.forEach((r, i) => {
    const y = top + i * rowH + rowH - 11;
    out.push(`<text x="${labelW - 12}" y="${y}" text-anchor="end" fill="#1f2328"${r.ours ? ' font-weight="bold"' : ''}>${escape(r.name)}</text>`);
  });
  out.push(`<text x="20" y="${height - 16}" fill="#57606a">in-process peers run the loader once per process; lock-guarded cache-aside coordinates but polls</text>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

export function writeChart(): string {
  const rows = readStampedeRows(readFileSync(path.join(here, 'RESULTS.md'), 'utf8'));
  const file = path.join(here, 'stampede.svg');
  writeFileSync(file, renderChart(rows));
  return file;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  process.stdout.write(`wrote ${path.relative(process.cwd(), writeChart())}\n`);
}
