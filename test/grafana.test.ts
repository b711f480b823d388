/**
 * The Grafana dashboard (docs/grafana/dogpile-guard.json) asks only for what the library
 * exposes: after registerDogpileMetrics() and a real workload on a real Redis (stampedes,
 * hits, stale answers and refreshes, fail-safe, a frozen Redis), every metric its queries
 * name is a series of that prom-client registry's scrape, every label they group by or match
 * on is one of its labels (or job/instance, which Prometheus adds), and every literal label
 * value they match is one the scrape holds.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { registerDogpileMetrics } from '../src/prometheus/index.js';
import { runWorkload } from '../tools/metrics-workload.js';
import { exposedSamples, promqlNames } from '../tools/promql-names.js';
import { useRedis } from './support/use-redis.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const server = useRedis();

interface Dashboard {
  panels: { id: number; type: string; title: string; gridPos: { x: number; w: number }; datasource?: { uid: string }; targets?: { expr: string; datasource: { uid: string } }[] }[];
  templating: { list: { name: string; type: string; query: string | { query: string } }[] };
}
const dashboard = JSON.parse(readFileSync(path.join(root, 'docs', 'grafana', 'dogpile-guard.json'), 'utf8')) as Dashboard;

/** Every query of the dashboard: the panels' targets and the template variables' queries. */
function queries(): string[] {
  const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
  for (const variable of dashboard.templating.list) if (variable.type === 'query') exprs.push(typeof variable.query === 'string' ? variable.query : variable.query.query);
  return exprs;
}

/** Labels Prometheus attaches at scrape time, not the library. */
const TARGET_LABELS = new Set(['job', 'instance']);

describe('the Grafana dashboard', () => {
  it('is an importable dashboard: unique panel ids, every query on the chosen Prometheus data source', () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(dashboard.templating.list.find((v) => v.name === 'datasource')).toMatchObject({ type: 'datasource', query: 'prometheus' });
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24);
      for (const target of panel.targets!) expect(target.datasource.uid, panel.title).toBe('${datasource}');
    }
  });

  it('names only metrics, labels and label values a real registry exposes after real traffic', async () => {
    const registry = new Registry();
    const metrics = registerDogpileMetrics({ registry });
    try {
      await runWorkload({ server, rounds: 4, freezeMs: 600 });
      const samples = exposedSamples(await registry.metrics());
      const problems: string[] = [];
      const named = new Set<string>();
      for (const expr of queries()) {
        const { metrics: names, grouping, matchers } = promqlNames(expr);
        const labelsOf = (metric: string) => samples.get(metric) ?? new Map<string, Set<string>>();
        for (const name of names) {
          named.add(name);
          if (!samples.has(name)) problems.push(`${name} is not exposed (in ${expr})`);
        }
        for (const label of grouping) {
          if (!TARGET_LABELS.has(label) && !names.some((n) => labelsOf(n).has(label))) problems.push(`label ${label} is on none of ${names.join(', ')}`);
        }
        for (const m of matchers) {
          if (TARGET_LABELS.has(m.label)) continue;
          const values = m.metric ? labelsOf(m.metric).get(m.label) : undefined;
          if (!values) {
            problems.push(`label ${m.label} is not on ${m.metric}`);
            continue;
          }
          if (m.op === '=' || m.op === '=~') {
            for (const value of m.op === '=' ? [m.value] : m.value.split('|')) {
              if (!values.has(value)) problems.push(`${m.metric}{${m.label}="${value}"} never appears (values: ${[...values].join(', ')})`);
            }
          }
        }
      }
      expect(problems).toEqual([]);
      // The dashboard covers every series family the library registers.
      const families = [...samples.keys()].filter((n) => n.startsWith('dogpile_guard_')).map((n) => n.replace(/_(bucket|sum|count)$/, ''));
      for (const family of new Set(families)) expect([...named].some((n) => n.startsWith(family)), family).toBe(true);
    } finally {
      metrics.dispose();
    }
  });

  it('the query reader finds a misspelt metric, a wrong label and a label value', () => {
    const read = promqlNames('sum by (outcme) (rate(dogpile_guard_cals_total{job=~"$job", outcome=~"hit|stael"}[$__rate_interval])) / sum(rate(dogpile_guard_calls_total[5m]))');
    expect(read.metrics.sort()).toEqual(['dogpile_guard_calls_total', 'dogpile_guard_cals_total']);
    expect(read.grouping).toEqual(['outcme']);
    expect(read.matchers).toEqual([
      { metric: 'dogpile_guard_cals_total', label: 'job', op: '=~', value: '$job' },
      { metric: 'dogpile_guard_cals_total', label: 'outcome', op: '=~', value: 'hit|stael' },
    ]);
    expect(promqlNames('label_values(dogpile_guard_calls_total{job=~"$job"}, instance)')).toMatchObject({ metrics: ['dogpile_guard_calls_total'], grouping: ['instance'] });
  });
});
