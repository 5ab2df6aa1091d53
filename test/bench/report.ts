/**
 * The report of one run: JSON with every figure (written as is) and a Markdown rendering that puts
 * each figure next to its target and to the baseline measured in the same run.
 */
import type { ApiServerResult } from './admission-apiserver.js';
import type { DirectResult, ServerRun, VariantSpec } from './admission-direct.js';
import type { MachineInfo } from './env.js';
import type { FanoutResult } from './fanout.js';
import { SETTLE_MS, type InContainerResult } from './in-container.js';
import type { KubeletDefaultsResult, KubeletRun, PathFigures } from './kubelet-defaults.js';
import type { MemoryFigures, MemoryResult } from './memory.js';
import type { ProfileSummary } from './profile.js';
import type { AdmissionGrowthResult } from './admission-growth.js';
import { renderAdmissionGrowth, renderReconcilerGrowth } from './growth-report.js';
import { table } from './markdown-table.js';
import type { ReconcilerGrowthResult } from './reconciler-growth.js';
import type { Scale } from './scale.js';
import { round, spreadText, spreadVerdict } from './stats.js';

export interface SectionResult {
  loadBefore: number[];
  loadAfter: number[];
  seconds: number;
  result?: unknown;
  error?: string;
}

export interface BenchReport {
  name: string;
  startedAt: string;
  finishedAt?: string;
  totalSeconds?: number;
  command: string;
  note?: string;
  /** Extra flags the admission service ran with (--admission-arg). */
  admissionArgs?: string[];
  /** The admission variants of an A/B (--ab), measured next to the service. */
  variants?: VariantSpec[];
  /** NODE_OPTIONS of the run's reconcilers, when set (--reconciler-node-options; KD_RECONCILER_NODE_OPTIONS in the A/B runs). */
  reconcilerNodeOptions?: string;
  scale: Scale;
  machine: MachineInfo;
  loadAverageEnd?: number[];
  sections: Partial<
    Record<
      | 'admission-direct'
      | 'admission-apiserver'
      | 'admission-growth'
      | 'fanout'
      | 'in-container'
      | 'kubelet-defaults'
      | 'memory'
      | 'reconciler-growth',
      SectionResult
    >
  >;
  profile?: ProfileSummary;
}

/**
 * The targets of the performance issue (real peers and real limits), each measured against a peer or
 * a limit taken in the same run: the minimal webhook, the Go controller-runtime peer, the API server's
 * own patch rate.
 */
export const PEER_TARGETS = {
  /** service ÷ minimal parse-and-echo webhook, reviews per second at full load */
  throughputToMinimal: 0.8,
  /** service ÷ Go peer, reviews per second at full load */
  throughputToGo: 1.0,
  p99At500Ms: 5,
  /** service ÷ minimal webhook, CPU per review at full load */
  cpuToMinimal: 1.5,
  /** p99 of kdcluster writes, webhook on vs off; and not above the Go peer's */
  apiOverheadP99Pct: 10,
  /** reconciler delivery rate ÷ a bare client's patch rate */
  deliveryToRaw: 0.8,
  writeRatio: 1,
  /** at 2,000 clusters / 10,000 pods: standby after delivery, and after leading */
  rssMiB: 150,
  largeClusters: 10_000,
  largeRssMiB: 400,
  largeFanoutClusters: 1000,
  largeFanoutSeconds: 60,
  inContainerP50Ms: 2000,
  inContainerMaxMs: 5000,
};

/** The targets the bench had before the peers (kept as a second table for continuity). */
export const TARGETS = {
  throughputRatio: 0.7,
  p99At500Ms: 5,
  cpuPerReviewUs: 200,
  apiOverheadP99Pct: 10,
  fanoutSeconds: 15,
  writeRatio: 1.05,
  idleWrites: 0,
  restartWrites: 0,
  rssMiB: 200,
};

type Verdict = 'met' | 'NOT met' | 'n/a' | 'NOT measured' | 'within noise';
const verdict = (ok: boolean | undefined): Verdict => (ok === undefined ? 'n/a' : ok ? 'met' : 'NOT met');
/** A figure this run did not produce counts as not met, said as such. */
const measured = (ok: boolean | undefined): Verdict => (ok === undefined ? 'NOT measured' : ok ? 'met' : 'NOT met');

const f = (v: number | undefined, unit = '') => (v === undefined || !Number.isFinite(v) ? '–' : `${v}${unit}`);

/** Each transport's rate when the bare client measured more than one (results before 2026-12-07 have none). */
function rawRuns(raw: { runs?: { transport: string; patchesPerSecond: number }[] }): string {
  return raw.runs && raw.runs.length > 1
    ? `; ${raw.runs.map((r) => `${r.transport} ${r.patchesPerSecond}/s`).join(', ')}`
    : '';
}

export function renderMarkdown(r: BenchReport): string {
  const direct = r.sections['admission-direct']?.result as DirectResult | undefined;
  const api = r.sections['admission-apiserver']?.result as ApiServerResult | undefined;
  const fan = r.sections.fanout?.result as FanoutResult | undefined;
  const mem = r.sections.memory?.result as MemoryResult | undefined;
  const at500 = direct?.rates.find((x) => x.rate === 500);
  const out: string[] = [];

  out.push(`# kd-connections benchmark — ${r.name}`);
  out.push('');
  out.push(
    `Run \`${r.command}\` from ${r.startedAt} to ${r.finishedAt ?? '?'} (${r.totalSeconds ?? '?'} s), scale **${r.scale.name}**.`,
  );
  if (r.note) out.push('', `Note: ${r.note}`);
  if (r.admissionArgs?.length) out.push('', `Admission service flags added: \`${r.admissionArgs.join(' ')}\``);
  if (r.reconcilerNodeOptions !== undefined)
    out.push(
      '',
      `Reconciler NODE_OPTIONS: ${r.reconcilerNodeOptions ? `\`${r.reconcilerNodeOptions}\`` : "none (Node's defaults)"}`,
    );
  out.push('');
  out.push(
    `Commit: ${r.machine.revision ?? 'not recorded (a report from before the bench recorded it)'}. ` +
      `Machine: ${r.machine.cores} cores, ${r.machine.cpuModel}, ${r.machine.totalMemMiB} MiB, Node ${r.machine.node} (${r.machine.platform}). ` +
      `Load average (1/5/15 min) at start ${r.machine.loadAverage.join(' / ')}, at end ${(r.loadAverageEnd ?? []).join(' / ')}; ` +
      'per section below. A load average near or above the core count means other work shared the machine and the absolute figures are pessimistic; the ratios compare runs made in the same conditions.',
  );
  out.push('');

  const ic = r.sections['in-container']?.result as InContainerResult | undefined;
  out.push('## Targets against real peers and limits (same run)');
  out.push('');
  out.push(
    table(
      ['figure', 'measured', 'peer / limit (same run)', 'target', 'verdict'],
      peerRows(r, direct, api, fan, mem, ic),
    ),
  );
  out.push('');
  out.push('## Figures against the earlier targets');
  out.push('');
  const rows: (string | number)[][] = [];
  if (direct) {
    const t = direct.throughput;
    rows.push([
      'admission throughput, service ÷ bare `node:https` (HTTPS keep-alive, ~5 KB kdcluster reviews)',
      `**${t.ratio}** (${f(t.service.rps)} vs ${f(t.baseline.rps)} reviews/s)`,
      `bare node:https answering a fixed review: ${f(t.baseline.rps)}/s`,
      `≥ ${TARGETS.throughputRatio}`,
      verdict(t.ratio >= TARGETS.throughputRatio),
    ]);
    if (at500) {
      rows.push([
        'admission p99 latency at 500 reviews/s',
        `**${f(at500.service.load.latencyMs.p99, ' ms')}** (p50 ${f(at500.service.load.latencyMs.p50, ' ms')})`,
        `baseline p99 ${f(at500.baseline.load.latencyMs.p99, ' ms')}`,
        `≤ ${TARGETS.p99At500Ms} ms`,
        verdict(at500.service.load.latencyMs.p99 <= TARGETS.p99At500Ms),
      ]);
      rows.push([
        'admission server CPU per review at 500 reviews/s',
        `**${f(at500.service.cpuPerReviewUs, ' µs')}**`,
        `baseline ${f(at500.baseline.cpuPerReviewUs, ' µs')}`,
        `≤ ${TARGETS.cpuPerReviewUs} µs`,
        verdict(at500.service.cpuPerReviewUs <= TARGETS.cpuPerReviewUs),
      ]);
    }
    rows.push([
      'admission server CPU per review at full load',
      `${f(t.service.cpuPerReviewUs, ' µs')} (baseline ÷ service ${t.cpuRatio})`,
      `baseline ${f(t.baseline.cpuPerReviewUs, ' µs')}; minimal webhook ${f(t.minimal.cpuPerReviewUs, ' µs')}`,
      `≤ ${TARGETS.cpuPerReviewUs} µs`,
      verdict(t.service.cpuPerReviewUs <= TARGETS.cpuPerReviewUs),
    ]);
    rows.push([
      'admission throughput, service ÷ minimal webhook (parses, echoes the uid; no target, for reading the gap)',
      `${t.ratioToMinimal} (CPU minimal ÷ service ${t.cpuRatioToMinimal})`,
      `minimal: ${f(t.minimal.rps)}/s`,
      '–',
      'n/a',
    ]);
  }
  if (api) {
    rows.push([
      'kdcluster writes through the API server, webhook on vs off: p99 overhead',
      `**${f(api.overheadPct.all.p99, ' %')}** (create ${f(api.overheadPct.create.p99, ' %')}, update ${f(api.overheadPct.update.p99, ' %')})`,
      `webhook off: p99 ${f(api.latencyMs.all.off.p99, ' ms')}`,
      `≤ ${TARGETS.apiOverheadP99Pct} %`,
      verdict(api.overheadPct.all.p99 <= TARGETS.apiOverheadP99Pct),
    ]);
  }
  if (fan) {
    rows.push([
      `fan-out: 1 ConfigMap → ${fan.clusters} clusters × ${fan.pods / fan.clusters} pods, edit until every pod holds the new configmeta`,
      `**${f(Math.round(fan.edit.allPodsMs / 100) / 10, ' s')}**`,
      '–',
      `≤ ${TARGETS.fanoutSeconds} s`,
      verdict(fan.edit.allPodsMs / 1000 <= TARGETS.fanoutSeconds && fan.edit.podsUpdated === fan.pods),
    ]);
    rows.push([
      'fan-out: API writes ÷ minimum (audit log)',
      `**${fan.edit.ratio}** (${fan.edit.writes.kdclusters} bumps + ${fan.edit.writes['kdclusters/status']} status + ${fan.edit.writes.pods} pod patches${fan.edit.writes.other ? ` + ${fan.edit.writes.other} other` : ''}; events ${fan.edit.writes.events})`,
      `minimum ${fan.edit.minimum} = ${fan.clusters} + ${fan.clusters} + ${fan.pods}`,
      `≤ ${TARGETS.writeRatio}`,
      verdict(fan.edit.ratio <= TARGETS.writeRatio),
    ]);
    rows.push([
      `writes during ${fan.idle.seconds} s idle (objects + events; lease renewals apart)`,
      `**${fan.idle.objectWrites + fan.idle.writes.events}** (lease renewals ${fan.idle.writes.leases})`,
      '–',
      '0',
      verdict(fan.idle.objectWrites + fan.idle.writes.events === 0),
    ]);
    rows.push([
      'writes after a restart with nothing changed (objects + events)',
      `**${fan.restart.objectWrites + fan.restart.writes.events}** (lease ${fan.restart.writes.leases})`,
      '–',
      '0',
      verdict(fan.restart.objectWrites + fan.restart.writes.events === 0),
    ]);
  }
  if (mem) {
    rows.push([
      `reconciler RSS, ${mem.clusters} clusters / ${mem.pods} pods cached (standby, caches only)`,
      `**${f(mem.standby.rssMiB, ' MiB')}**`,
      '–',
      `≤ ${TARGETS.rssMiB} MiB`,
      verdict(mem.standby.rssMiB <= TARGETS.rssMiB),
    ]);
    if (mem.leading)
      rows.push([
        `reconciler RSS after leading and writing every pod and cluster, ${mem.leading.settleSeconds} s after it went quiet (peak during the delivery)${mem.leading.completed ? '' : ' — delivery NOT complete at the deadline'}`,
        `**${f(mem.leading.settledRssMiB, ' MiB')}** (peak ${f(mem.leading.peakRssMiB, ' MiB')})`,
        '–',
        `≤ ${TARGETS.rssMiB} MiB`,
        verdict(mem.leading.completed ? mem.leading.settledRssMiB <= TARGETS.rssMiB : undefined),
      ]);
  }
  for (const [name, s] of Object.entries(r.sections))
    if (s?.error) rows.push([`section ${name}`, 'FAILED (see below)', '–', '–', 'NOT met']);
  out.push(table(['figure', 'measured', 'baseline / reference (same run)', 'target', 'verdict'], rows));
  out.push('');

  if (direct) out.push(...renderDirect(direct, r.sections['admission-direct']!));
  if (api) out.push(...renderApi(api, r.sections['admission-apiserver']!));
  if (fan) out.push(...renderFanout(fan, r.sections.fanout!));
  if (ic) out.push(...renderInContainer(ic, r.sections['in-container']!));
  const kd = r.sections['kubelet-defaults'];
  if (kd?.result) out.push(...renderKubeletDefaults(kd.result as KubeletDefaultsResult, kd));
  if (mem) out.push(...renderMemory(mem, r.sections.memory!));
  const ag = r.sections['admission-growth'];
  if (ag?.result)
    out.push(
      ...sectionHead('Where admission cost grows: connections per cluster', ag),
      ...renderAdmissionGrowth(ag.result as AdmissionGrowthResult, r.name),
    );
  const rg = r.sections['reconciler-growth'];
  if (rg?.result)
    out.push(
      ...sectionHead('Where reconciler cost grows: member pods', rg),
      ...renderReconcilerGrowth(rg.result as ReconcilerGrowthResult, r.name),
    );
  for (const [name, s] of Object.entries(r.sections)) {
    if (!s?.error) continue;
    out.push(`## ${name}: FAILED`, '', '```', s.error, '```', '');
  }
  if (r.profile) out.push(...renderProfile(r.profile));
  out.push('## Scale', '', '```json', JSON.stringify(r.scale, null, 2), '```', '');
  return out.join('\n');
}

const perCore = (cpuPerReviewUs: number | undefined) =>
  cpuPerReviewUs ? `${Math.round(1e6 / cpuPerReviewUs)} reviews per CPU-second` : '–';

/** Every row of the issue's target table; a figure the run did not produce says so. */
function peerRows(
  r: BenchReport,
  direct: DirectResult | undefined,
  api: ApiServerResult | undefined,
  fan: FanoutResult | undefined,
  mem: MemoryResult | undefined,
  ic: InContainerResult | undefined,
): (string | number)[][] {
  const T = PEER_TARGETS;
  const t = direct?.throughput;
  const at500 = direct?.rates.find((x) => x.rate === 500);
  const go = t?.go;
  const rows: (string | number)[][] = [];
  const sp = t?.spreads;
  rows.push([
    'admission throughput ÷ minimal parse-and-echo webhook (full load)',
    t
      ? sp
        ? `**${spreadText(sp.ratioToMinimal)}** over ${sp.ratioToMinimal.rounds} interleaved rounds (median ${f(t.service.rps)} vs ${f(t.minimal.rps)} reviews/s)`
        : `**${t.ratioToMinimal}** (${f(t.service.rps)} vs ${f(t.minimal.rps)} reviews/s)`
      : '–',
    t ? `minimal: ${f(t.minimal.rps)}/s, ${perCore(t.minimal.cpuPerReviewUs)}` : '–',
    `≥ ${T.throughputToMinimal}`,
    sp
      ? spreadVerdict(sp.ratioToMinimal, T.throughputToMinimal, 'atLeast')
      : measured(t ? t.ratioToMinimal >= T.throughputToMinimal : undefined),
  ]);
  rows.push([
    'admission throughput ÷ Go controller-runtime peer (full load; same reviews, TLS, load generator, CPU)',
    t?.ratioToGo !== undefined && go
      ? `**${sp?.ratioToGo ? spreadText(sp.ratioToGo) : t.ratioToGo}** (${f(t.service.rps)} vs ${f(go.rps)} reviews/s; per core ${perCore(t.service.cpuPerReviewUs)} vs ${perCore(go.cpuPerReviewUs)})`
      : `– ${direct?.goError ? `(Go peer: ${direct.goError.split('\n')[0]})` : ''}`,
    go
      ? `Go peer: ${f(go.rps)}/s, ${f(go.cpuPerReviewUs, ' µs')} CPU per review, p50 ${f(go.p50Ms, ' ms')} / p99 ${f(go.p99Ms, ' ms')}; answers equal ${direct?.peerCheck?.equal ?? '?'}/${direct?.peerCheck?.reviews ?? '?'}`
      : '–',
    `≥ ${T.throughputToGo.toFixed(1)}`,
    sp?.ratioToGo
      ? spreadVerdict(sp.ratioToGo, T.throughputToGo, 'atLeast')
      : measured(t?.ratioToGo !== undefined ? t.ratioToGo >= T.throughputToGo : undefined),
  ]);
  rows.push([
    'admission p99 at 500 reviews/s',
    at500
      ? `**${f(at500.service.load.latencyMs.p99, ' ms')}** (p50 ${f(at500.service.load.latencyMs.p50, ' ms')})`
      : '–',
    at500
      ? `Go peer p99 ${f(at500.go?.load.latencyMs.p99, ' ms')}; bare node:https p99 ${f(at500.baseline.load.latencyMs.p99, ' ms')}`
      : '–',
    `≤ ${T.p99At500Ms} ms`,
    measured(at500 ? at500.service.load.latencyMs.p99 <= T.p99At500Ms : undefined),
  ]);
  const cpuToMinimal = t ? Math.round((t.service.cpuPerReviewUs / t.minimal.cpuPerReviewUs) * 100) / 100 : undefined;
  rows.push([
    'CPU per review at full load ÷ minimal webhook',
    t
      ? `**${sp ? spreadText(sp.cpuToMinimal) : cpuToMinimal}** (${f(t.service.cpuPerReviewUs, ' µs')} vs ${f(t.minimal.cpuPerReviewUs, ' µs')})`
      : '–',
    go
      ? `Go peer ${f(go.cpuPerReviewUs, ' µs')} (÷ minimal ${Math.round((go.cpuPerReviewUs / t!.minimal.cpuPerReviewUs) * 100) / 100})`
      : '–',
    `≤ ${T.cpuToMinimal}`,
    sp
      ? spreadVerdict(sp.cpuToMinimal, T.cpuToMinimal, 'atMost')
      : measured(cpuToMinimal !== undefined ? cpuToMinimal <= T.cpuToMinimal : undefined),
  ]);
  const goP99 = api?.goOverheadPct?.all.p99;
  rows.push([
    'API-server write overhead, webhook on vs off, p99 (kdcluster create + update)',
    api ? `**${f(api.overheadPct.all.p99, ' %')}** (p50 ${f(api.overheadPct.all.p50, ' %')})` : '–',
    api
      ? `Go peer ${f(goP99, ' %')} (p50 ${f(api.goOverheadPct?.all.p50, ' %')}); webhook off p99 ${f(api.latencyMs.all.off.p99, ' ms')}`
      : '–',
    `≤ +${T.apiOverheadP99Pct} %, and not above the Go peer's`,
    measured(
      api && goP99 !== undefined
        ? api.overheadPct.all.p99 <= T.apiOverheadP99Pct && api.overheadPct.all.p99 <= goP99
        : api && api.overheadPct.all.p99 > T.apiOverheadP99Pct
          ? false
          : undefined,
    ),
  ]);
  rows.push([
    `fan-out delivery rate ÷ raw API-server patch rate (${fan ? `${fan.pods} pods` : '–'}); writes ÷ minimum`,
    fan
      ? `**${f(fan.deliveryRatioToRaw)}** (${f(fan.deliveryPerSecond)} vs ${f(fan.raw?.patchesPerSecond)} patches/s); writes ÷ minimum **${fan.edit.ratio}**`
      : '–',
    fan?.raw
      ? `bare client, ${fan.raw.transport ?? 'client-node (a TLS connection per request)'}: ${fan.raw.pods} patches of ~${fan.raw.meanPatchBytes} B, ${fan.raw.concurrency.clusters} × ${fan.raw.concurrency.podsPerCluster} in flight, ${fan.raw.seconds} s${rawRuns(fan.raw)}`
      : `– ${fan?.rawError ?? ''}`,
    `≥ ${T.deliveryToRaw}; writes ÷ minimum ${T.writeRatio.toFixed(2)}`,
    measured(
      fan?.deliveryRatioToRaw !== undefined
        ? fan.deliveryRatioToRaw >= T.deliveryToRaw && fan.edit.ratio === T.writeRatio
        : fan && fan.edit.ratio !== T.writeRatio
          ? false
          : undefined,
    ),
  ]);
  // The 150 MiB rows are stated for 2,000 clusters / 10,000 pods: other counts are shown, not judged.
  const atTarget = mem && mem.clusters === 2000 && mem.pods === 10_000;
  const scaleNote = mem && !atTarget ? ` — at ${mem.clusters} clusters / ${mem.pods} pods, not the target counts` : '';
  rows.push([
    `reconciler RSS, 2,000 clusters / 10,000 pods, standby after delivery${scaleNote}`,
    mem?.standbyAfterDelivery
      ? `**${f(mem.standbyAfterDelivery.rssMiB, ' MiB')}**`
      : `– ${mem?.standbyAfterDeliveryError ?? ''}`,
    mem
      ? `standby before delivery ${f(mem.standby.rssMiB, ' MiB')}${
          mem.standbyAfterDelivery?.settled
            ? `; the same standby ${mem.standbyAfterDelivery.settled.afterSeconds} s after its sync ${f(mem.standbyAfterDelivery.settled.rssMiB, ' MiB')} (not judged)`
            : ''
        }`
      : '–',
    `≤ ${T.rssMiB} MiB`,
    atTarget && mem.standbyAfterDelivery ? verdict(mem.standbyAfterDelivery.rssMiB <= T.rssMiB) : 'NOT measured',
  ]);
  rows.push([
    `reconciler RSS, 2,000 clusters / 10,000 pods, after leading (${mem?.leading?.settleSeconds ?? '–'} s after quiet)${scaleNote}`,
    mem?.leading?.completed
      ? `**${f(mem.leading.settledRssMiB, ' MiB')}** (peak ${f(mem.leading.peakRssMiB, ' MiB')})`
      : '–',
    '–',
    `≤ ${T.rssMiB} MiB`,
    atTarget && mem.leading?.completed ? verdict(mem.leading.settledRssMiB <= T.rssMiB) : 'NOT measured',
  ]);
  const large = r.scale.name === 'large' && mem && mem.clusters >= T.largeClusters;
  const largeRss = mem?.leading?.completed
    ? Math.max(mem.leading.settledRssMiB, mem.standbyAfterDelivery?.rssMiB ?? 0)
    : undefined;
  rows.push([
    `reconciler at 10,000 clusters / 50,000 pods (\`--scale large\`): RSS`,
    large ? `**${f(largeRss, ' MiB')}**` : `– (this run: scale ${r.scale.name})`,
    '–',
    `≤ ${T.largeRssMiB} MiB`,
    large && largeRss !== undefined ? verdict(largeRss <= T.largeRssMiB) : 'NOT measured',
  ]);
  const largeFan = r.scale.name === 'large' && fan && fan.clusters >= T.largeFanoutClusters;
  rows.push([
    `fan-out of one ConfigMap to 1,000 clusters (\`--scale large\`)`,
    largeFan ? `**${f(Math.round(fan.edit.allPodsMs / 100) / 10, ' s')}**` : `– (this run: scale ${r.scale.name})`,
    '–',
    `≤ ${T.largeFanoutSeconds} s`,
    largeFan
      ? verdict(fan.edit.allPodsMs / 1000 <= T.largeFanoutSeconds && fan.edit.podsUpdated === fan.pods)
      : 'NOT measured',
  ]);
  rows.push([
    `ConfigMap edit → readable in the member containers (real node${ic ? `, ${ic.pods} containers` : ''})`,
    ic
      ? `p50 **${f(ic.edit.p50Ms, ' ms')}**, max **${f(ic.edit.maxMs, ' ms')}** (${ic.edit.seen}/${ic.pods} seen)`
      : '–',
    // Measured in this run, per pod: the pod object updated → the sidecar swapped the file in.
    ic?.kubelet
      ? `per pod, pod updated → file swapped (kubelet volume update + the sidecar's poll): p50 ${f(ic.kubelet.p50Ms, ' ms')}, max ${f(ic.kubelet.maxMs, ' ms')}`
      : '–',
    `p50 ≤ ${T.inContainerP50Ms / 1000} s, max ≤ ${T.inContainerMaxMs / 1000} s`,
    measured(
      ic
        ? ic.edit.seen === ic.pods && ic.edit.p50Ms <= T.inContainerP50Ms && ic.edit.maxMs <= T.inContainerMaxMs
        : undefined,
    ),
  ]);
  const kd = r.sections['kubelet-defaults']?.result as KubeletDefaultsResult | undefined;
  const kubeletRun = (name: string) => kd?.runs.find((x) => x.syncFrequency === name);
  const [dflt, harness] = [kubeletRun('default'), kubeletRun('10s')];
  const runText = (x: PathFigures, total: number) =>
    `p50 **${f(x.p50Ms, ' ms')}**, p90 ${f(x.p90Ms, ' ms')}, max **${f(x.maxMs, ' ms')}** (${x.deliveries}/${total} deliveries, ${x.slow.length} over 5 s)`;
  const product = (x: KubeletRun) => runText(x, x.edits * x.pods);
  const agents = (x: KubeletRun | undefined, kubelet: string) =>
    x?.agent ? `; node-agent prototype, ${kubelet}: ${runText(x.agent, x.edits * x.agent.pods)}` : '';
  rows.push([
    `ConfigMap edit → readable by configcli, ${dflt ? `${dflt.edits} edits × ${dflt.pods} pods` : 'edit after edit'}, kubelet defaults (syncFrequency 1m)`,
    dflt ? product(dflt) : '–',
    harness
      ? `the harness's kubelet (syncFrequency 10s): ${product(harness)}${agents(harness, '10s')}${agents(dflt, 'defaults')}`
      : '–',
    `p50 ≤ ${T.inContainerP50Ms / 1000} s, max ≤ ${T.inContainerMaxMs / 1000} s`,
    measured(
      dflt ? dflt.missing === 0 && dflt.p50Ms <= T.inContainerP50Ms && dflt.maxMs <= T.inContainerMaxMs : undefined,
    ),
  ]);
  return rows;
}

const sectionHead = (title: string, s: SectionResult) => [
  `## ${title}`,
  '',
  `${s.seconds} s; load average before ${s.loadBefore.join(' / ')}, after ${s.loadAfter.join(' / ')}.`,
  '',
];

function runRow(x: ServerRun, label: string): (string | number)[] {
  const l = x.load.latencyMs;
  return [
    label,
    x.target,
    Math.round(x.load.rps),
    x.served,
    f(x.cpuPerReviewUs),
    f(l.p50),
    f(l.p90),
    f(l.p99),
    f(l.max),
    x.load.non2xx + x.load.errors + x.load.timeouts,
    f(x.rssMiB),
  ];
}

/** The A/B: each variant next to the service (medians of the same rounds; p99 at the fixed rates). */
function renderVariants(d: DirectResult): string[] {
  const p99At = (rate: number, which: (r: DirectResult['rates'][number]) => ServerRun | undefined) => {
    const r = d.rates.find((x) => x.rate === rate);
    const run = r ? which(r) : undefined;
    return run ? f(run.load.latencyMs.p99) : '–';
  };
  const rates = d.rates.map((r) => r.rate);
  const rows: (string | number)[][] = [
    [
      'service (this checkout)',
      '–',
      d.throughput.service.rps,
      f(d.throughput.service.cpuPerReviewUs),
      d.throughput.ratioToMinimal,
      round2(d.throughput.service.cpuPerReviewUs / d.throughput.minimal.cpuPerReviewUs),
      ...rates.map((rate) => p99At(rate, (r) => r.service)),
      '–',
    ],
    ...d.variants!.map((v, i) => [
      `${v.name}`,
      [v.spec.root ? `root ${v.spec.root}` : '', v.spec.node ? `NODE_OPTIONS ${v.spec.node}` : '', ...v.spec.args]
        .filter(Boolean)
        .join('; ') || '–',
      v.rps,
      f(v.cpuPerReviewUs),
      v.ratioToMinimal,
      round2(v.cpuPerReviewUs / d.throughput.minimal.cpuPerReviewUs),
      ...rates.map((rate) => p99At(rate, (r) => r.variants?.[i])),
      `${v.answers.equal}/${v.answers.reviews}`,
    ]),
  ];
  // Paired within a round (the two ran minutes apart at most): steadier than a ratio of medians on a busy machine.
  const paired = (name: string) => {
    const ratios: number[] = [];
    for (const r of d.throughput.runs) {
      if (r.target !== 'service') continue;
      const v = d.throughput.runs.find((x) => x.target === `ab:${name}` && x.round === r.round);
      if (v) ratios.push(v.cpuPerReviewUs / r.cpuPerReviewUs);
    }
    ratios.sort((a, b) => a - b);
    const mid = ratios.length ? (ratios[(ratios.length - 1) >> 1]! + ratios[ratios.length >> 1]!) / 2 : NaN;
    return {
      median: round2(mid),
      min: round2(ratios[0] ?? NaN),
      max: round2(ratios[ratios.length - 1] ?? NaN),
      n: ratios.length,
    };
  };
  return [
    '### A/B (admission variants in the same rounds)',
    '',
    `Service ÷ each variant, full load: ${d.variants!.map((v) => `${v.name} ${v.serviceRatio} (CPU per review ${v.name} ÷ service ${v.serviceCpuRatio})`).join(', ')}.`,
    '',
    `CPU per review, variant ÷ service paired round by round (median, range over the rounds): ${d
      .variants!.map((v) => {
        const p = paired(v.name);
        return `${v.name} ${p.median} (${p.min}–${p.max}, ${p.n} rounds)`;
      })
      .join(', ')}.`,
    '',
    table(
      [
        'admission',
        'variant',
        'reviews/s',
        'CPU µs/review',
        '÷ minimal (throughput)',
        'CPU ÷ minimal',
        ...rates.map((r) => `p99 ms at ${r}/s`),
        'answers equal to the service',
      ],
      rows,
    ),
    '',
  ];
}

const round2 = (x: number) => Math.round(x * 100) / 100;

function renderDirect(d: DirectResult, s: SectionResult): string[] {
  const head = [
    'run',
    'server',
    'reviews/s',
    'served',
    'CPU µs/review',
    'p50 ms',
    'p90 ms',
    'p99 ms',
    'max ms',
    'failed',
    'RSS MiB',
  ];
  return [
    ...sectionHead('Admission, direct (HTTPS keep-alive, no API server in the path)', s),
    `Reviews (cycled by every connection): ${d.reviews.map((x) => `${x.name} ${x.bytes} B`).join(', ')} — mean ${d.meanReviewBytes} B. ` +
      `Lookups per review (from the service's metrics): ${Object.entries(d.lookupsPerReview)
        .map(([k, v]) => `${k} ${v.cache ?? 0} cache / ${(v.live ?? 0) + (v.live_not_found ?? 0)} live`)
        .join(', ')}.`,
    '',
    `TLS negotiated: service ${d.tls.service.protocol} ${d.tls.service.cipher}, baseline ${d.tls.baseline.protocol} ${d.tls.baseline.cipher}. ` +
      `${d.connections} keep-alive connections, no pipelining. ` +
      (d.pinned
        ? `Servers pinned to CPU ${d.pinned.server}, load generator (autocannon, own process) to CPU ${d.pinned.loadGenerator}.`
        : 'Not pinned.') +
      ' CPU per review = process.cpuUsage() of the server over the run ÷ reviews it served; latency measured by the load generator.',
    '',
    `Full load, median of ${Math.max(...d.throughput.runs.map((x) => x.round ?? 1))} rounds (order reversed every other round): service ${d.throughput.service.rps}/s, baseline ${d.throughput.baseline.rps}/s, ratio **${d.throughput.ratio}**; ` +
      `CPU per review ${d.throughput.service.cpuPerReviewUs} µs vs ${d.throughput.baseline.cpuPerReviewUs} µs (baseline ÷ service ${d.throughput.cpuRatio}). ` +
      `Minimal webhook (bare node:https that parses the review and echoes its uid with a one-op patch): ${d.throughput.minimal.rps}/s, ${d.throughput.minimal.cpuPerReviewUs} µs per review; service ÷ minimal ${d.throughput.ratioToMinimal}. ` +
      `Failed requests over all runs: ${d.failures}.`,
    '',
    ...(d.throughput.go
      ? [
          `Go controller-runtime peer (test/controlplane/bins/kd-go-peer: same rules against an informer cache, same serving pair and TLS settings, pinned like the service): ${d.throughput.go.rps}/s, ${d.throughput.go.cpuPerReviewUs} µs CPU per review (${perCore(d.throughput.go.cpuPerReviewUs)}, service ${perCore(d.throughput.service.cpuPerReviewUs)}); service ÷ Go ${d.throughput.ratioToGo}, CPU Go ÷ service ${d.throughput.cpuRatioToGo}. ` +
            (d.peerCheck
              ? `Its answers (allowed, status code and message, patch, warnings) equal the service's for ${d.peerCheck.equal}/${d.peerCheck.reviews} reviews (${d.peerCheck.denied} of them denials)${d.peerCheck.differences.length ? `; differences: \`${JSON.stringify(d.peerCheck.differences).slice(0, 1500)}\`` : ''}.`
              : ''),
          '',
        ]
      : d.goError
        ? [`Go peer not measured: ${d.goError.split('\n')[0]}`, '']
        : []),
    table(head, [
      ...d.throughput.runs.map((x) => runRow(x, `full load, round ${x.round}`)),
      ...d.rates.flatMap((x) => [
        runRow(x.service, `${x.rate}/s`),
        ...(x.variants ?? []).map((v) => runRow(v, `${x.rate}/s`)),
        ...(x.go ? [runRow(x.go, `${x.rate}/s`)] : []),
        runRow(x.baseline, `${x.rate}/s`),
      ]),
    ]),
    '',
    ...(d.variants?.length ? renderVariants(d) : []),
    `RSS after the runs: service ${d.rss.serviceMiB} MiB, baseline ${d.rss.baselineMiB} MiB${d.rss.goMiB !== undefined ? `, Go peer ${d.rss.goMiB} MiB` : ''}.`,
    '',
  ];
}

function renderApi(a: ApiServerResult, s: SectionResult): string[] {
  const rows = (['create', 'update', 'all'] as const).flatMap((op) =>
    (['off', 'on', 'go'] as const)
      .filter((m) => a.latencyMs[op][m])
      .map((m) => {
        const x = a.latencyMs[op][m]!;
        return [op, m === 'go' ? 'on (Go peer)' : m, x.count, f(x.p50), f(x.p90), f(x.p99), f(x.max)];
      }),
  );
  return [
    ...sectionHead('Admission through the API server (client-node, webhook on vs off)', s),
    `${a.opsPerMode} creates + ${a.opsPerMode} updates per mode, ${a.concurrency} in flight, blocks alternating between namespace ` +
      `\`${a.namespaces.on}\` (selected by the validating + mutating configurations, url mode on 127.0.0.1) and \`${a.namespaces.off}\` (not selected, same objects). ` +
      `The service answered ${a.reviewsServed} reviews (2 per write with the webhook on); ${a.mutatedOn} clusters on / ${a.mutatedOff} off carry the generator the mutating webhook set. Failures: ${a.failures}.`,
    '',
    table(['op', 'webhook', 'n', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'], rows),
    '',
    `Overhead (on − off) ÷ off: create p50 ${a.overheadPct.create.p50} %, p99 ${a.overheadPct.create.p99} %; update p50 ${a.overheadPct.update.p50} %, p99 ${a.overheadPct.update.p99} %; all p50 ${a.overheadPct.all.p50} %, p99 **${a.overheadPct.all.p99} %**.`,
    '',
    ...(a.goOverheadPct
      ? [
          `Go peer (namespace \`${a.namespaces.go}\`, kdcluster webhooks only, in the same alternating blocks): answered ${a.goReviewsServed} reviews; ${a.mutatedGo} clusters carry its generator. ` +
            `Overhead (go − off) ÷ off: create p50 ${a.goOverheadPct.create.p50} %, p99 ${a.goOverheadPct.create.p99} %; update p50 ${a.goOverheadPct.update.p50} %, p99 ${a.goOverheadPct.update.p99} %; all p50 ${a.goOverheadPct.all.p50} %, p99 **${a.goOverheadPct.all.p99} %**.`,
          '',
        ]
      : []),
  ];
}

function renderFanout(x: FanoutResult, s: SectionResult): string[] {
  const w = (c: FanoutResult['edit']['writes']) =>
    `bumps ${c.kdclusters}, status ${c['kdclusters/status']}, pods ${c.pods}, events ${c.events}, leases ${c.leases}, other ${c.other}, failed ${c.failed}`;
  return [
    ...sectionHead('Reconciler fan-out (real control plane)', s),
    `${x.clusters} clusters × ${x.pods / x.clusters} pods created in ${x.createSeconds} s; first delivery (reconciler start → quiet): ${x.firstDelivery.seconds} s, ${x.firstDelivery.podWrites} pod patches, ${x.firstDelivery.statusWrites} status writes.`,
    '',
    `Edit of the ConfigMap → pod holds the new configmeta: first ${f(x.edit.firstPodMs, ' ms')}, median ${f(x.edit.p50PodMs, ' ms')}, all ${x.edit.podsUpdated}/${x.pods} **${f(x.edit.allPodsMs, ' ms')}**; reconciler quiet again after ${f(x.edit.settledMs, ' ms')}.`,
    '',
    `Writes by the reconciler (audit log): ${w(x.edit.writes)}. Minimum ${x.edit.minimum}; ratio **${x.edit.ratio}**. ` +
      `Its own counters: pods ${x.edit.reconcilerCounted.pod}, status ${x.edit.reconcilerCounted.status}, bumps ${x.edit.reconcilerCounted.cluster}, events ${x.edit.reconcilerCounted.event}, failed ${x.edit.reconcilerCounted.failed}.`,
    '',
    `Idle ${x.idle.seconds} s: ${w(x.idle.writes)}.`,
    '',
    `Restart with nothing changed (new process → leader → ${x.restart.reconciles} reconciles → quiet in ${x.restart.secondsToQuiet} s): ${w(x.restart.writes)}.`,
    '',
    `Reconciler RSS at the end: ${x.reconcilerRssMiB} MiB.`,
    '',
    x.raw
      ? `API server's limit (reconciler stopped): a bare client (${x.raw.transport ?? 'client-node, a TLS connection per request'}${rawRuns(x.raw)}) made the same ${x.raw.pods} pod patches (configmeta + hash replaced by values of the same size, the same \`test\` preconditions, ~${x.raw.meanPatchBytes} B each, ${x.raw.concurrency.clusters} clusters × ${x.raw.concurrency.podsPerCluster} pods in flight as the reconciler's defaults) in ${x.raw.seconds} s: **${x.raw.patchesPerSecond} patches/s** (${x.raw.failed} failed). The reconciler delivered ${x.edit.podsUpdated} pods in ${f(x.edit.allPodsMs, ' ms')} after the edit: ${x.deliveryPerSecond} pods/s, **${x.deliveryRatioToRaw}** of the bare client's rate.${allWritesText(x)}`
      : `API server's limit not measured${x.rawError ? `: ${x.rawError}` : ''}.`,
    '',
  ];
}

/**
 * Every write of the edit (audit log) per second against the same limit: a delivery needs a generator bump
 * and a status write per cluster besides each pod's patch, so pods ÷ pod-only limit cannot pass pods ÷ writes.
 */
function allWritesText(x: FanoutResult): string {
  const w = x.edit.writes;
  const writes = w.kdclusters + w['kdclusters/status'] + w.pods;
  if (!x.raw || !x.edit.writesMs) return '';
  const perSecond = round(writes / (x.edit.writesMs / 1000));
  return ` All ${writes} writes of the edit (audit log: ${w.kdclusters} bumps, ${w['kdclusters/status']} status, ${w.pods} pods), the last answered ${f(x.edit.writesMs, ' ms')} after the edit: ${perSecond} writes/s, ${round(perSecond / x.raw.patchesPerSecond)} of the bare client's rate; with ${x.pods / x.clusters} pods a cluster a pod rate can be at most ${round(w.pods / writes)} of a writes rate.`;
}

function renderInContainer(x: InContainerResult, s: SectionResult): string[] {
  return [
    ...sectionHead('ConfigMap edit → readable inside the member containers (real node)', s),
    `${x.clusters} clusters × ${x.pods / x.clusters} running member pods on one node (Ready ${x.nodeReadySeconds} s after its start); every container read its first document ${x.podsReadySeconds} s after the pods were created, every pod was Ready after ${x.allReadySeconds ?? '–'} s, and the ConfigMap was edited ${SETTLE_MS / 1000} s after that.`,
    '',
    `Edit of the ConfigMap → new content read by the app in the container: ${x.edit.seen}/${x.pods} containers, min ${f(x.edit.minMs, ' ms')}, median **${f(x.edit.p50Ms, ' ms')}**, max **${f(x.edit.maxMs, ' ms')}** (each container polls every 0.1 s).`,
    '',
    ...(x.swap
      ? [
          `Where the time went: the kd-guestconfig sidecar swapped the new document in (container log timestamps) p50 ${f(x.swap.p50Ms, ' ms')}, max ${f(x.swap.maxMs, ' ms')} after the edit (${x.swap.seen} pods)` +
            (x.patched && x.kubelet
              ? `; the pod objects carried it (a watch from the bench: reconciler + API server) p50 ${f(x.patched.p50Ms, ' ms')}, max ${f(x.patched.maxMs, ' ms')} (${x.patched.seen} pods); per pod, patched → swapped (kubelet volume update + the sidecar's 0.3 s poll) p50 ${f(x.kubelet.p50Ms, ' ms')}, max ${f(x.kubelet.maxMs, ' ms')}` +
                (x.volume
                  ? `; the kubelet's volume update that the sidecar took (its directory's name, whole seconds) p50 ${f(x.volume.p50Ms, ' ms')}, max ${f(x.volume.maxMs, ' ms')} after the edit.`
                  : '.')
              : '.'),
          '',
        ]
      : []),
  ];
}

function renderKubeletDefaults(x: KubeletDefaultsResult, s: SectionResult): string[] {
  const row = (sync: string, path: string, r: PathFigures, total: number, extra = '') => [
    sync === 'default' ? "unset (the kubelet's default, 1m)" : sync,
    path,
    `${r.deliveries}/${total}${r.missing ? ` (${r.missing} missing)` : ''}`,
    f(r.p50Ms, ' ms'),
    f(r.p90Ms, ' ms'),
    f(r.maxMs, ' ms'),
    r.patched ? `${f(r.patched.p50Ms, ' ms')}, ${f(r.patched.maxMs, ' ms')}` : '–',
    r.slow
      .map((d) => `${d.edit}, ${d.pod}, ${d.ms}${d.patchedMs === undefined ? '' : `; ${d.patchedMs}`}`)
      .join(' / ') || 'none',
    [...new Set(r.configcli)].join(', ') + extra,
  ];
  const agents = x.runs.flatMap((r) => (r.agent ? [r.agent] : []));
  return [
    ...sectionHead('ConfigMap edit after edit → readable by configcli, per kubelet setting (real node)', s),
    table(
      [
        'kubelet syncFrequency',
        'path',
        'deliveries',
        'p50',
        'p90',
        'max',
        'pod object patched: p50, max',
        'over 5 s (edit, pod, ms; patched at ms)',
        'configcli read at the end',
      ],
      x.runs.flatMap((r) => [
        row(r.syncFrequency, 'product: downward-API volume, sidecar', r, r.edits * r.pods),
        ...(r.agent
          ? [
              row(
                r.syncFrequency,
                'node-agent prototype',
                r.agent,
                r.edits * r.agent.pods,
                ` (${r.agent.writes} files written, ${r.agent.errors.length} errors)`,
              ),
            ]
          : []),
      ]),
    ),
    '',
    ...(agents.some((a) => a.errors.length)
      ? ['Node-agent errors (each retried):', '', ...agents.flatMap((a) => a.errors.map((e) => `- ${e}`)), '']
      : []),
  ];
}

function renderMemory(m: MemoryResult, s: SectionResult): string[] {
  return [
    ...sectionHead('Reconciler memory', s),
    `${m.clusters} clusters and ${m.pods} member pods created through the API server in ${m.create.seconds} s (${m.create.objectsPerSecond} objects/s).`,
    '',
    `Standby (caches synced in ${m.standby.syncSeconds} s, not leading, no writes): RSS **${m.standby.rssMiB} MiB**, heap used ${m.standby.heapUsedMiB} MiB.`,
    '',
    m.leading
      ? `Leading: ${m.leading.podWrites} pod patches and ${m.leading.statusWrites} status writes in ${m.leading.deliverySeconds} s${m.leading.completed ? '' : ' (deadline reached before every pod was written)'}; ` +
        `RSS peak ${m.leading.peakRssMiB} MiB; when quiet ${m.leading.rssMiB} MiB (heap used ${m.leading.heapUsedMiB} MiB, much of it garbage of the burst); ` +
        `${m.leading.settleSeconds} s later **${f(m.leading.settledRssMiB)} MiB** (heap used ${f(m.leading.settledHeapUsedMiB)} MiB).`
      : 'Leading phase not measured.',
    '',
    m.standbyAfterDelivery
      ? `Standby after delivery (a second reconciler, caches synced in ${m.standbyAfterDelivery.syncSeconds} s while every pod carries configmeta): RSS **${m.standbyAfterDelivery.rssMiB} MiB**, heap used ${m.standbyAfterDelivery.heapUsedMiB} MiB${
          m.standbyAfterDelivery.settled
            ? `; ${m.standbyAfterDelivery.settled.afterSeconds} s after its sync RSS ${m.standbyAfterDelivery.settled.rssMiB} MiB, heap used ${m.standbyAfterDelivery.settled.heapUsedMiB} MiB`
            : ''
        }.`
      : `Standby after delivery not measured${m.standbyAfterDeliveryError ? `: ${m.standbyAfterDeliveryError}` : ''}.`,
    '',
    ...(m.reconcilerEnv ? [`Reconcilers' extra environment: \`${JSON.stringify(m.reconcilerEnv)}\`.`, ''] : []),
    ...memoryTable(m),
    ...(m.standbyVariants?.length
      ? [
          'The standby after delivery again, one process after the other in the same state, under other V8 flags (MiB):',
          '',
          table(
            [
              'variant',
              'NODE_OPTIONS (environment)',
              'RSS',
              'heap total',
              'heap used',
              'external',
              'new space committed',
              'resident: malloc brk / anon / files',
            ],
            [
              [
                "the run's reconcilers",
                m.reconcilerEnv?.NODE_OPTIONS || m.reconcilerNodeOptions
                  ? `\`${m.reconcilerEnv?.NODE_OPTIONS || m.reconcilerNodeOptions}\``
                  : '(none: Node defaults)',
                ...variantCells(m.standbyAfterDelivery?.memory),
              ],
              ...m.standbyVariants.map((v) => [
                v.name,
                (v.nodeOptions ? `\`${v.nodeOptions}\`` : '(none: Node defaults)') +
                  (v.env
                    ? ` (${Object.entries(v.env)
                        .map(([k, x]) => `\`${k}=${x}\``)
                        .join(', ')})`
                    : ''),
                ...(v.error ? [v.error.split('\n')[0]!, '', '', '', '', ''] : variantCells(v.memory)),
              ]),
            ],
          ),
          '',
        ]
      : []),
  ];
}

const variantCells = (x: MemoryFigures | undefined) =>
  x
    ? [
        x.rss,
        x.heapTotal,
        x.heapUsed,
        x.external,
        x.spaces.new?.size ?? '–',
        x.mappings ? `${x.mappings.brk} / ${x.mappings.anon} / ${x.mappings.file}` : '–',
      ]
    : ['–', '–', '–', '–', '–', '–'];

/** process.memoryUsage()'s figures and the V8 heap spaces at each point measured, in MiB. */
function memoryTable(m: MemoryResult): string[] {
  const points: [string, MemoryFigures | undefined][] = [
    ['standby', m.standby.memory],
    ['leading, quiet', m.leading?.memory],
    [`leading, ${m.leading?.settleSeconds ?? '?'} s later`, m.leading?.settledMemory],
    ['standby after delivery', m.standbyAfterDelivery?.memory],
  ];
  const have = points.filter((p): p is [string, MemoryFigures] => p[1] !== undefined);
  if (have.length === 0) return [];
  const spaces = [...new Set(have.flatMap(([, x]) => Object.keys(x.spaces)))].filter((s) =>
    have.some(([, x]) => (x.spaces[s]?.size ?? 0) >= 1),
  );
  return [
    'Where the memory is (MiB; RSS and heap from process.memoryUsage(), per V8 space committed / used):',
    '',
    table(
      [
        'point',
        'RSS',
        'heap total',
        'heap used',
        'external',
        'RSS − heap total − external',
        ...spaces,
        'resident: malloc brk / anon / files',
      ],
      have.map(([name, x]) => [
        name,
        x.rss,
        x.heapTotal,
        x.heapUsed,
        x.external,
        round(x.rss - x.heapTotal - x.external),
        ...spaces.map((s) => (x.spaces[s] ? `${x.spaces[s].size} / ${x.spaces[s].used}` : '–')),
        x.mappings ? `${x.mappings.brk} / ${x.mappings.anon} / ${x.mappings.file}` : '–',
      ]),
    ),
    '',
  ];
}

function renderProfile(p: ProfileSummary): string[] {
  return [
    '## CPU profile of the admission service (`--cpu-prof`: from the start of the direct load until the service stopped)',
    '',
    `${p.totalMs} ms of samples (idle excluded) from ${p.files.join(', ')}.`,
    '',
    table(
      ['origin', 'self ms', '%'],
      p.byOrigin.map((o) => [o.origin, o.ms, o.pct]),
    ),
    '',
    table(
      ['function', 'where', 'self ms', '%'],
      p.topFunctions.map((x) => [`\`${x.fn}\``, x.where, x.ms, x.pct]),
    ),
    '',
  ];
}
