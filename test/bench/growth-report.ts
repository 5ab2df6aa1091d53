/**
 * The growth sections in the report: a table per service, the fitted shape of each cost in words
 * (growth-fit.ts), and one PNG per service drawn from the same figures (plot.ts), written beside the
 * report as <name>-admission-growth.png and <name>-reconciler-growth.png.
 */
import type { AdmissionGrowthResult } from './admission-growth.js';
import { describeFit, fitGrowth, type Point } from './growth-fit.js';
import { table } from './markdown-table.js';
import { COLORS, renderPlot } from './plot.js';
import type { ReconcilerGrowthResult } from './reconciler-growth.js';

export const growthPngName = (report: string, service: 'admission' | 'reconciler') => `${report}-${service}-growth.png`;

/** The fit in words, or why there is none (fewer than three points). */
function shape(points: Point[], unit: string, per = 1): string {
  return points.length >= 3 ? describeFit(fitGrowth(points), unit, per) : `${points.length} points: no fit`;
}

export function admissionGrowthPoints(a: AdmissionGrowthResult) {
  return {
    p99: a.steps.map((s) => ({ x: s.connections, y: s.p99Ms })),
    p50: a.steps.map((s) => ({ x: s.connections, y: s.p50Ms })),
    cpu: a.steps.map((s) => ({ x: s.connections, y: s.cpuPerReviewUs })),
  };
}

export function reconcilerGrowthPoints(r: ReconcilerGrowthResult) {
  return {
    fanout: r.steps.map((s) => ({ x: s.pods, y: s.fanoutSeconds })),
    rss: r.steps.map((s) => ({ x: s.pods, y: s.rssMiB })),
    peak: r.steps.map((s) => ({ x: s.pods, y: s.peakRssMiB })),
  };
}

export function renderAdmissionGrowth(a: AdmissionGrowthResult, report: string): string[] {
  const pts = admissionGrowthPoints(a);
  return [
    table(
      [
        'connections',
        'clusters + ConfigMaps',
        'review bytes (mean)',
        `p50 at ${a.rate}/s`,
        `p99 at ${a.rate}/s`,
        'full load reviews/s',
        'CPU per review (full load)',
        'failed',
      ],
      a.steps.map((s) => [
        s.connections,
        `${s.clusters} + ${s.configmaps}`,
        s.meanReviewBytes,
        `${s.p50Ms} ms`,
        `${s.p99Ms} ms`,
        Math.round(s.rps),
        `${s.cpuPerReviewUs} µs`,
        s.failures,
      ]),
    ),
    '',
    `- p99 at ${a.rate}/s against connections: ${shape(pts.p99, 'ms')}.`,
    `- CPU per review against connections: ${shape(pts.cpu, 'µs')}.`,
    '',
    `![admission cost against connections per cluster](${growthPngName(report, 'admission')})`,
    '',
  ];
}

export function renderReconcilerGrowth(r: ReconcilerGrowthResult, report: string): string[] {
  const pts = reconcilerGrowthPoints(r);
  return [
    table(
      [
        'member pods',
        'clusters',
        'create (new objects)',
        'first delivery to them (until quiet 2 s)',
        'fan-out of one edit',
        'pods per second of fan-out',
        'RSS peak',
        `RSS ${r.settleSeconds} s after quiet`,
        'heap used',
        'failed writes',
      ],
      r.steps.map((s) => [
        s.pods,
        s.clusters,
        `${s.createSeconds} s`,
        `${s.deliverSeconds} s`,
        `${s.fanoutSeconds} s`,
        s.patchesPerSecond,
        `${s.peakRssMiB} MiB`,
        `${s.rssMiB} MiB`,
        `${s.heapUsedMiB} MiB`,
        s.failedWrites,
      ]),
    ),
    ...(r.error ? ['', `Stopped early: ${r.error}`] : []),
    '',
    `- Fan-out time against pods: ${shape(pts.fanout, 's', 1000)}.`,
    `- RSS against pods: ${shape(pts.rss, 'MiB', 1000)}.`,
    '',
    `![reconciler cost against member pods](${growthPngName(report, 'reconciler')})`,
    '',
  ];
}

/** The two PNGs, for the results that have at least one step. */
export function growthPlots(
  report: string,
  a: AdmissionGrowthResult | undefined,
  r: ReconcilerGrowthResult | undefined,
): { file: string; png: Buffer }[] {
  const out: { file: string; png: Buffer }[] = [];
  if (a?.steps.length) {
    const pts = admissionGrowthPoints(a);
    out.push({
      file: growthPngName(report, 'admission'),
      png: renderPlot({
        title: `Admission: cost against connections per cluster (${report})`,
        panels: [
          {
            title: `latency at ${a.rate} reviews/s`,
            xLabel: 'connections per cluster',
            yLabel: 'ms',
            series: [
              { name: 'p99', color: COLORS.red, points: pts.p99 },
              { name: 'p50', color: COLORS.blue, points: pts.p50 },
            ],
          },
          {
            title: 'CPU per review at full load',
            xLabel: 'connections per cluster',
            yLabel: 'µs',
            series: [{ name: 'CPU per review', color: COLORS.green, points: pts.cpu }],
          },
        ],
      }),
    });
  }
  if (r?.steps.length) {
    const pts = reconcilerGrowthPoints(r);
    out.push({
      file: growthPngName(report, 'reconciler'),
      png: renderPlot({
        title: `Reconciler: cost against member pods (${report})`,
        panels: [
          {
            title: 'fan-out of one ConfigMap edit',
            xLabel: 'member pods',
            yLabel: 'seconds',
            series: [{ name: 'edit → every pod patched', color: COLORS.blue, points: pts.fanout }],
          },
          {
            title: 'reconciler memory',
            xLabel: 'member pods',
            yLabel: 'MiB',
            series: [
              { name: 'RSS peak', color: COLORS.red, points: pts.peak },
              { name: `RSS ${r.settleSeconds} s after quiet`, color: COLORS.orange, points: pts.rss },
            ],
          },
        ],
      }),
    });
  }
  return out;
}
