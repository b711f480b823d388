/**
 * Reading Prometheus names. What a PromQL expression (as the Grafana dashboard's queries write them) names: its metric
 * names, and its label matchers with their values. Enough of PromQL for the dashboard's
 * queries: selectors, functions, aggregations with `by`/`without`, arithmetic, ranges and
 * Grafana's `$variables`.
 */

const FUNCTIONS = new Set([
  'abs', 'absent', 'avg', 'avg_over_time', 'bool', 'bottomk', 'by', 'ceil', 'changes', 'clamp_max', 'clamp_min', 'count',
  'count_over_time', 'delta', 'deriv', 'floor', 'group', 'group_left', 'group_right', 'histogram_quantile', 'idelta',
  'ignoring', 'increase', 'irate', 'label_replace', 'label_values', 'max', 'max_over_time', 'min', 'min_over_time',
  'offset', 'on', 'quantile', 'rate', 'resets', 'round', 'scalar', 'sort', 'sort_desc', 'stddev', 'sum', 'sum_over_time',
  'time', 'topk', 'vector', 'without', 'and', 'or', 'unless',
]);

export interface Matcher {
  metric: string | undefined;
  label: string;
  op: '=' | '!=' | '=~' | '!~';
  value: string;
}

export interface PromqlNames {
  metrics: string[];
  /** Label names of `by (...)`, `without (...)` and of the second argument of label_values(). */
  grouping: string[];
  matchers: Matcher[];
}

export function promqlNames(expr: string): PromqlNames {
  const metrics = new Set<string>();
  const grouping = new Set<string>();
  const matchers: Matcher[] = [];
  // Selectors with matchers: name{a="x", b=~"y"} (the name may be absent: {__name__=...}).
  let rest = expr.replace(/([a-zA-Z_:][a-zA-Z0-9_:]*)?\{([^}]*)\}/g, (_all, name: string | undefined, body: string) => {
    for (const m of body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g)) {
      matchers.push({ metric: name, label: m[1]!, op: m[2] as Matcher['op'], value: m[3]! });
    }
    return name ? ` ${name} ` : ' ';
  });
  rest = rest.replace(/\b(by|without)\s*\(([^)]*)\)/g, (_all, _kw: string, labels: string) => {
    for (const l of labels.split(',').map((s) => s.trim()).filter(Boolean)) grouping.add(l);
    return ' ';
  });
  rest = rest.replace(/label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)/g, (_all, name: string, label: string) => {
    grouping.add(label);
    return ` ${name} `;
  });
  rest = rest.replace(/"(?:[^"\\]|\\.)*"/g, ' ').replace(/\[[^\]]*\]/g, ' ').replace(/\$\{?\w+\}?/g, ' ');
  for (const m of rest.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    if (!FUNCTIONS.has(m[0])) metrics.add(m[0]);
  }
  return { metrics: [...metrics], grouping: [...grouping], matchers };
}

/** The samples of a Prometheus text exposition: metric name → label name → values seen. */
export function exposedSamples(text: string): Map<string, Map<string, Set<string>>> {
  const samples = new Map<string, Map<string, Set<string>>>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s/.exec(line);
    if (!m) continue;
    let labels = samples.get(m[1]!);
    if (!labels) samples.set(m[1]!, (labels = new Map()));
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      let values = labels.get(l[1]!);
      if (!values) labels.set(l[1]!, (values = new Set()));
      values.add(l[2]!);
    }
  }
  return samples;
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** One scrape: when (seconds since the start) and its samples. */
export interface Scrape {
  t: number;
  series: Sample[];
}

/** The samples of a Prometheus text exposition, one per line. */
export function exposedSeries(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}
