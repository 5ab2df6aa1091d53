/**
 * The kubelet-defaults rows of the report come from the run's record: the verdict follows the product's
 * figures, and the node-agent prototype's figures sit beside them, never in the verdict.
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import type { KubeletDefaultsResult } from './kubelet-defaults.js';
import { renderMarkdown, type BenchReport } from './report.js';

const record = JSON.parse(
  readFileSync(new URL('./results/2026-12-07-delivery-agent.json', import.meta.url), 'utf8'),
) as BenchReport;
const runsOf = (r: BenchReport) => (r.sections['kubelet-defaults']!.result as KubeletDefaultsResult).runs;
const summaryRow = (md: string) =>
  md.split('\n').find((l) => l.startsWith('| ConfigMap edit → readable by configcli'))!;

describe('kubelet-defaults in the report', () => {
  it('gives NOT met when a delivery on the defaults took over 5 s, and lists each slow one', () => {
    const md = renderMarkdown(record);
    expect(summaryRow(md)).toMatch(/max \*\*84250 ms\*\* \(1400\/1400 deliveries, 7 over 5 s\).*\| NOT met \|$/);
    expect(md).toContain('68, kd-2, 84250; 116.9');
  });

  it('renders the node-agent rows from the record, errors included', () => {
    const md = renderMarkdown(record);
    expect(summaryRow(md)).toContain(
      'node-agent prototype, defaults: p50 **170 ms**, p90 220 ms, max **280 ms** (1400/1400 deliveries, 0 over 5 s)',
    );
    expect(md).toContain(
      "| unset (the kubelet's default, 1m) | node-agent prototype | 1400/1400 | 170 ms | 220 ms | 280 ms |",
    );
    expect(md).toContain('edit-200-end (1412 files written, 1 errors)');
    expect(md).toContain('- watch ended: The operation was aborted due to timeout; reopening');
  });

  it('gives met once the product path is within the target, whatever the agent did', () => {
    const r = structuredClone(record);
    const [dflt] = runsOf(r);
    Object.assign(dflt!, { maxMs: 900, slow: [] });
    dflt!.agent!.maxMs = 60_000;
    expect(summaryRow(renderMarkdown(r))).toMatch(/\| met \|$/);
  });

  it('renders a record from before the prototype (no agent) without its rows', () => {
    const r = structuredClone(record);
    for (const run of runsOf(r)) delete run.agent;
    const md = renderMarkdown(r);
    // (the record's own note still names it)
    expect(md).not.toContain('| node-agent prototype |');
    expect(summaryRow(md)).not.toContain('node-agent');
    expect(md).not.toContain('Node-agent errors');
    expect(summaryRow(md)).toMatch(/NOT met/);
  });
});
