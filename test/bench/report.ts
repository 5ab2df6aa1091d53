/**
 * The report of one run: JSON with every figure (written as is) and a Markdown rendering that puts
 * each figure next to its target and to the baseline measured in the same run.
 */
import type { ApiServerResult } from './admission-apiserver.js';
import type { DirectResult, ServerRun } from './admission-direct.js';
import type { MachineInfo } from './env.js';
import type { FanoutResult } from './fanout.js';
import type { InContainerResult } from './in-container.js';
import type { MemoryResult } from './memory.js';
import type { ProfileSummary } from './profile.js';
import type { Scale } from './scale.js';

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
  scale: Scale;
  machine: MachineInfo;
  loadAverageEnd?: number[];
  sections: Partial<
    Record<'admission-direct' | 'admission-apiserver' | 'fanout' | 'in-container' | 'memory', SectionResult>
  >;
  profile?: ProfileSummary;
}

/** The project's performance targets (availability is measured by the reliability suite, not here). */
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

type Verdict = 'met' | 'NOT met' | 'n/a';
const verdict = (ok: boolean | undefined): Verdict => (ok === undefined ? 'n/a' : ok ? 'met' : 'NOT met');

function table(head: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.map((c) => String(c)).join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

const f = (v: number | undefined, unit = '') => (v === undefined || !Number.isFinite(v) ? '–' : `${v}${unit}`);

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
  out.push('');
  out.push(
    `Machine: ${r.machine.cores} cores, ${r.machine.cpuModel}, ${r.machine.totalMemMiB} MiB, Node ${r.machine.node} (${r.machine.platform}). ` +
      `Load average (1/5/15 min) at start ${r.machine.loadAverage.join(' / ')}, at end ${(r.loadAverageEnd ?? []).join(' / ')}; ` +
      'per section below. A load average near or above the core count means other work shared the machine and the absolute figures are pessimistic; the ratios compare runs made in the same conditions.',
  );
  out.push('');

  out.push('## Figures against the targets');
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
  const ic = r.sections['in-container']?.result as InContainerResult | undefined;
  if (ic) out.push(...renderInContainer(ic, r.sections['in-container']!));
  if (mem) out.push(...renderMemory(mem, r.sections.memory!));
  for (const [name, s] of Object.entries(r.sections)) {
    if (!s?.error) continue;
    out.push(`## ${name}: FAILED`, '', '```', s.error, '```', '');
  }
  if (r.profile) out.push(...renderProfile(r.profile));
  out.push('## Scale', '', '```json', JSON.stringify(r.scale, null, 2), '```', '');
  return out.join('\n');
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
    `Full load, median of ${d.throughput.runs.length / 3} rounds (order reversed every other round): service ${d.throughput.service.rps}/s, baseline ${d.throughput.baseline.rps}/s, ratio **${d.throughput.ratio}**; ` +
      `CPU per review ${d.throughput.service.cpuPerReviewUs} µs vs ${d.throughput.baseline.cpuPerReviewUs} µs (baseline ÷ service ${d.throughput.cpuRatio}). ` +
      `Minimal webhook (bare node:https that parses the review and echoes its uid with a one-op patch): ${d.throughput.minimal.rps}/s, ${d.throughput.minimal.cpuPerReviewUs} µs per review; service ÷ minimal ${d.throughput.ratioToMinimal}. ` +
      `Failed requests over all runs: ${d.failures}.`,
    '',
    table(head, [
      ...d.throughput.runs.map((x) => runRow(x, `full load, round ${x.round}`)),
      ...d.rates.flatMap((x) => [runRow(x.service, `${x.rate}/s`), runRow(x.baseline, `${x.rate}/s`)]),
    ]),
    '',
    `RSS after the runs: service ${d.rss.serviceMiB} MiB, baseline ${d.rss.baselineMiB} MiB.`,
    '',
  ];
}

function renderApi(a: ApiServerResult, s: SectionResult): string[] {
  const rows = (['create', 'update', 'all'] as const).flatMap((op) =>
    (['off', 'on'] as const).map((m) => {
      const x = a.latencyMs[op][m];
      return [op, m, x.count, f(x.p50), f(x.p90), f(x.p99), f(x.max)];
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
  ];
}

function renderInContainer(x: InContainerResult, s: SectionResult): string[] {
  return [
    ...sectionHead('ConfigMap edit → readable inside the member containers (real node)', s),
    `${x.clusters} clusters × ${x.pods / x.clusters} running member pods on one node (Ready ${x.nodeReadySeconds} s after its start); every container read its first document ${x.podsReadySeconds} s after the pods were created.`,
    '',
    `Edit of the ConfigMap → new content read by the app in the container: ${x.edit.seen}/${x.pods} containers, min ${f(x.edit.minMs, ' ms')}, median **${f(x.edit.p50Ms, ' ms')}**, max **${f(x.edit.maxMs, ' ms')}** (each container polls every 0.1 s).`,
    '',
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
