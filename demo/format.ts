/**
 * Output helpers for the demo: aligned tables, a progress line, and colour only on a
 * terminal (never when the output is piped or NO_COLOR is set).
 */
const useColor = process.stdout.isTTY === true && !process.env.NO_COLOR && process.env.TERM !== 'dumb';
const live = process.stdout.isTTY === true;

const paint = (code: string) => (text: string) => (useColor ? `\x1b[${code}m${text}\x1b[0m` : text);
export const bold = paint('1');
export const dim = paint('2');
export const green = paint('32');
export const red = paint('31');

export function ms(value: number): string {
  if (!Number.isFinite(value)) return '—';
  return value < 10 ? `${value.toFixed(1)} ms` : `${Math.round(value)} ms`;
}

export function seconds(valueMs: number): string {
  return `${(valueMs / 1000).toFixed(2)} s`;
}

export interface Row {
  label: string;
  cells: string[];
  /** Colours applied to cells after alignment (index → colour). */
  color?: Record<number, (text: string) => string>;
}

/**
 * A table: a label column on the left, right-aligned value columns. `header` holds the
 * columns' titles, one array of lines per column; `null` rows are blank separators.
 */
export function table(header: string[][], rows: (Row | null)[], indent = '  '): string {
  const labelWidth = Math.max(0, ...rows.map((r) => (r ? r.label.length : 0)));
  const widths = header.map((lines, i) => Math.max(...lines.map((l) => l.length), ...rows.map((r) => (r ? (r.cells[i] ?? '').length : 0))));
  const gap = '   ';
  const out: string[] = [];
  const headerLines = Math.max(...header.map((h) => h.length));
  for (let line = 0; line < headerLines; line++) {
    const cells = header.map((h, i) => {
      const text = h[line - (headerLines - h.length)] ?? '';
      return text.padStart(widths[i]!);
    });
    out.push(indent + ' '.repeat(labelWidth) + gap + bold(cells.join(gap)));
  }
  out.push(indent + '─'.repeat(labelWidth + widths.reduce((a, w) => a + gap.length + w, 0)));
  for (const row of rows) {
    if (row === null) {
      out.push('');
      continue;
    }
    const cells = row.cells.map((c, i) => {
      const padded = c.padStart(widths[i]!);
      const color = row.color?.[i];
      return color ? color(padded) : padded;
    });
    out.push(indent + row.label.padEnd(labelWidth) + gap + cells.join(gap));
  }
  return out.join('\n');
}

/**
 * Progress of one herd. On a terminal: a bar redrawn in place. Otherwise: the label when it
 * starts and the outcome on the same line when it ends (no control characters).
 */
export class Progress {
  private lastDraw = 0;
  private readonly started = Date.now();

  constructor(
    private readonly label: string,
    private readonly total: number,
  ) {
    if (live) this.draw(0);
    else process.stdout.write(`  ${label} … `);
  }

  update(done: number): void {
    if (!live) return;
    const now = Date.now();
    if (done < this.total && now - this.lastDraw < 50) return;
    this.lastDraw = now;
    this.draw(done);
  }

  finish(summary: string): void {
    if (live) process.stdout.write(`\r\x1b[K  ${this.label} ${summary}\n`);
    else process.stdout.write(`${summary}\n`);
  }

  private draw(done: number): void {
    const width = 24;
    const filled = Math.round((done / this.total) * width);
    const bar = '█'.repeat(filled) + dim('░'.repeat(width - filled));
    const elapsed = seconds(Date.now() - this.started);
    process.stdout.write(`\r\x1b[K  ${this.label} ${bar} ${done}/${this.total}  ${dim(elapsed)}`);
  }
}
