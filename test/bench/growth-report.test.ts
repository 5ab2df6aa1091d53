/** The growth sections in the report: the table, the fitted shape in words, and a PNG per service. */
import { describe, expect, it } from '@jest/globals';
import type { AdmissionGrowthResult } from './admission-growth.js';
import { growthPlots, renderAdmissionGrowth, renderReconcilerGrowth } from './growth-report.js';
import type { ReconcilerGrowthResult } from './reconciler-growth.js';

const reconciler: ReconcilerGrowthResult = {
  podsPerCluster: 5,
  settleSeconds: 20,
  steps: [1000, 2500, 5000, 10000].map((pods) => ({
    pods,
    clusters: pods / 5,
    createSeconds: pods / 600,
    deliverSeconds: pods / 200,
    fanoutSeconds: pods / 200,
    patchesPerSecond: 200,
    peakRssMiB: 100 + pods / 100,
    rssMiB: 90 + pods / 250,
    heapUsedMiB: 30,
    failedWrites: 0,
  })),
};

const admission: AdmissionGrowthResult = {
  rate: 500,
  rateSec: 5,
  fullLoadSec: 6,
  steps: [1, 3, 10, 30, 100].map((k) => ({
    connections: k,
    clusters: Math.ceil(k / 2),
    configmaps: Math.floor(k / 2),
    meanReviewBytes: 4000 + 60 * k,
    rate: 500,
    p50Ms: 1,
    p99Ms: 3 + 0.02 * k,
    rps: 10000 - 20 * k,
    cpuPerReviewUs: 90 + 1.5 * k,
    failures: 0,
  })),
};

describe('growth report', () => {
  it('names the shape of each cost and links the plot', () => {
    const rec = renderReconcilerGrowth(reconciler, 'run-x').join('\n');
    expect(rec).toContain('| 10000 | 2000 |');
    expect(rec).toContain('- Fan-out time against pods: n (R² 1); straight line: +5 s per 1000 above 0 s');
    expect(rec).toContain('- RSS against pods: n (R² 1); straight line: +4 MiB per 1000 above 90 MiB');
    expect(rec).toContain('](run-x-reconciler-growth.png)');
    const adm = renderAdmissionGrowth(admission, 'run-x').join('\n');
    expect(adm).toContain(
      '- CPU per review against connections: n (R² 1); straight line: +1.5 µs per unit above 90 µs',
    );
    expect(adm).toContain('](run-x-admission-growth.png)');
  });

  it('says when a cost does not grow, and when no shape fits', () => {
    const p99 = [3.466, 2.508, 3.002, 2.383, 3.287];
    const noisy = { ...admission, steps: admission.steps.map((s, i) => ({ ...s, p99Ms: p99[i]! })) };
    expect(renderAdmissionGrowth(noisy, 'r').join('\n')).toContain(
      '- p99 at 500/s against connections: no shape fits (R² < 0.8); straight line:',
    );
    const flat = { ...admission, steps: admission.steps.map((s) => ({ ...s, p99Ms: 3 + s.connections / 1000 })) };
    expect(renderAdmissionGrowth(flat, 'r').join('\n')).toContain('- p99 at 500/s against connections: flat;');
  });

  it('a stopped run says so and keeps the steps it finished', () => {
    const md = renderReconcilerGrowth({ ...reconciler, steps: reconciler.steps.slice(0, 2), error: 'deadline' }, 'r');
    expect(md.join('\n')).toContain('Stopped early: deadline');
    expect(md.join('\n')).toContain('2 points: no fit');
  });

  it('one PNG per service with steps, none without', () => {
    const plots = growthPlots('run-x', admission, reconciler);
    expect(plots.map((p) => p.file)).toEqual(['run-x-admission-growth.png', 'run-x-reconciler-growth.png']);
    for (const p of plots) expect(p.png.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect(growthPlots('run-x', undefined, { ...reconciler, steps: [] })).toEqual([]);
  });
});
