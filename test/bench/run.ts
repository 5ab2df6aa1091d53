/**
 * `npm run bench [-- --scale large] [-- --only admission-direct,fanout] [-- --cpu-prof] [-- --no-pin]`
 *
 * Starts a control plane of its own (loopback only, audit log of every write), runs the sections in
 * order and writes test/bench/results/<date>[-<scale>].md and .json: every figure, its target (TARGETS
 * in report.ts), the baseline it is compared with (measured in the same run), and the machine (cores, CPU
 * model, Node version, load average before and after each section). A section that fails is reported
 * as failed and the others still run.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startControlPlane } from '../controlplane/controlplane.js';
import { admissionDirect, seedAdmissionNamespace, type Variant, type VariantSpec } from './admission-direct.js';
import { admissionApiServer } from './admission-apiserver.js';
import { benchEnv, loadAverage, machineInfo, say, timer } from './env.js';
import { fanout } from './fanout.js';
import { startGoPeer, type GoPeer } from './go-peer.js';
import { inContainer } from './in-container.js';
import { kubeletDefaults } from './kubelet-defaults.js';
import { reconcilerMemory } from './memory.js';
import { summarizeProfiles } from './profile.js';
import { renderMarkdown, type BenchReport, type SectionResult } from './report.js';
import { SCALES, type Scale } from './scale.js';
import { admissionGrowth, type AdmissionGrowthResult } from './admission-growth.js';
import { growthPlots } from './growth-report.js';
import { reconcilerGrowth, type ReconcilerGrowthResult } from './reconciler-growth.js';
import { installCrds } from '../support/crds.js';
import { type RunningAdmission, startAdmission } from '../support/services.js';

/** The chart's default: reviews are measured without a log line each, as a user runs them. */
const SHIPPED_LOG_LEVEL = '--log-level=info';

const SECTIONS = [
  'admission-direct',
  'admission-apiserver',
  'admission-growth',
  'fanout',
  'in-container',
  'kubelet-defaults',
  'memory',
  'reconciler-growth',
] as const;
type SectionName = (typeof SECTIONS)[number];

const { values } = parseArgs({
  options: {
    scale: { type: 'string', default: 'small' },
    only: { type: 'string' },
    out: { type: 'string' },
    name: { type: 'string' },
    note: { type: 'string' },
    'cpu-prof': { type: 'boolean', default: false },
    logs: { type: 'boolean', default: false },
    'no-pin': { type: 'boolean', default: false },
    'no-go-peer': { type: 'boolean', default: false },
    'admission-arg': { type: 'string', multiple: true, default: [] },
    ab: { type: 'string', multiple: true, default: [] },
    rounds: { type: 'string' },
    'kubelet-edits': { type: 'string' },
    'reconciler-node-options': { type: 'string' },
    'heap-snapshot': { type: 'string' },
    'standby-variant': { type: 'string', multiple: true, default: [] },
    render: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
  allowPositionals: false,
});

if (values.help) {
  console.log(`npm run bench -- [options]
  --scale small|large|smoke  counts and durations (default small: the target counts, a few minutes on 2 cores;
                        large: more cores; smoke: checks the bench itself runs, figures meaningless)
  --only a,b            sections to run: ${SECTIONS.join(', ')} (default all)
  --out DIR             where the report goes (default test/bench/results)
  --name NAME           report file name without extension (default <date>[-<scale>])
  --note TEXT           a line for the report (e.g. what changed since the last run)
  --cpu-prof            profile the admission service under load and summarize the profile in the report
  --logs                keep the reconcilers' logs next to the report (<name>.logs/)
  --no-pin              do not pin server and load generator to separate cores (taskset)
  --no-go-peer          leave the Go controller-runtime peer out of the admission sections (it is built on first use)
  --admission-arg ARG   extra flag for the admission service (repeatable), e.g. --admission-arg=--log-level=debug
  --kubelet-edits N     edits per kubelet setting in kubelet-defaults (default: the scale's)
  --rounds N            full-load rounds of admission-direct (default: the scale's); more rounds, steadier medians
  --ab SPEC             another admission service measured side by side with the first (repeatable), for an A/B
                        in one run: name=NAME[,root=DIR][,node=NODE_FLAGS][,arg=FLAG;FLAG] — root: another checkout
                        (built) whose admission/dist runs; node: NODE_OPTIONS; arg: extra service flags
  --reconciler-node-options OPTS  NODE_OPTIONS of the memory section's reconcilers (an A/B of V8 flags)
  --standby-variant 'NAME|OPTS[|K=V,...]'  one more standby after delivery with NODE_OPTIONS=OPTS (may be
                        empty) and more environment (repeatable)
  --heap-snapshot DIR   write heap snapshots of the memory section's reconcilers (leader when settled, standby after delivery) to DIR
  --render FILE.json    only rewrite the Markdown report of an earlier run from its JSON`);
  process.exit(0);
}

/** The Markdown report and the growth plots beside it (the JSON is the run's record and is not rewritten). */
function writeRendered(report: BenchReport, dir: string): string {
  const md = join(dir, `${report.name}.md`);
  writeFileSync(md, renderMarkdown(report));
  const growth = (k: 'admission-growth' | 'reconciler-growth') => report.sections[k]?.result;
  for (const plot of growthPlots(
    report.name,
    growth('admission-growth') as AdmissionGrowthResult | undefined,
    growth('reconciler-growth') as ReconcilerGrowthResult | undefined,
  ))
    writeFileSync(join(dir, plot.file), plot.png);
  return md;
}

if (values.render) {
  const report = JSON.parse(readFileSync(values.render, 'utf8')) as BenchReport;
  console.log(`wrote ${writeRendered(report, dirname(resolve(values.render)))}`);
  process.exit(0);
}

if (!(values.scale! in SCALES)) {
  console.error(`--scale must be one of ${Object.keys(SCALES).join(', ')}`);
  process.exit(2);
}
const preset: Scale = SCALES[values.scale as Scale['name']];
const rounds = values.rounds === undefined ? preset.direct.rounds : Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error('--rounds must be a whole number of at least 1');
  process.exit(2);
}
const scale: Scale = { ...preset, direct: { ...preset.direct, rounds } };
const only = values.only ? values.only.split(',').map((s) => s.trim()) : [...SECTIONS];
for (const s of only)
  if (!(SECTIONS as readonly string[]).includes(s)) {
    console.error(`unknown section ${s}; sections: ${SECTIONS.join(', ')}`);
    process.exit(2);
  }
const wanted = (s: SectionName) => only.includes(s);

const outDir = values.out ?? fileURLToPath(new URL('./results/', import.meta.url));
const date = new Date().toISOString().slice(0, 10);
const name = values.name ?? (scale.name === 'small' ? date : `${date}-${scale.name}`);
mkdirSync(outDir, { recursive: true });
const profDir = values['cpu-prof'] ? join(outDir, `${name}.profiles`) : undefined;
const logDir = values.logs ? join(outDir, `${name}.logs`) : undefined;
if (logDir) mkdirSync(logDir, { recursive: true });

/** `--ab name=NAME[,root=DIR][,node=FLAGS][,arg=FLAG;FLAG]`: the admission variants of an A/B. */
const abSpecs: VariantSpec[] = values.ab.map((text) => {
  const kv = new Map<string, string>();
  for (const part of text.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new Error(`--ab ${text}: expected key=value pairs separated by commas`);
    kv.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  const name = kv.get('name');
  if (!name || !/^[a-z0-9-]+$/.test(name))
    throw new Error(`--ab ${text}: name= (lower-case letters, digits, -) is required`);
  const root = kv.get('root');
  return {
    name,
    ...(root ? { root: resolve(root) } : {}),
    ...(kv.get('node') ? { node: kv.get('node') } : {}),
    args: (kv.get('arg') ?? '').split(';').filter((a) => a !== ''),
  };
});

const total = timer();
const report: BenchReport = {
  name,
  startedAt: new Date().toISOString(),
  // The note is shown as such; the command is what to type to measure the same way again.
  command: `npm run bench -- ${commandArgs(process.argv.slice(2)).join(' ')}`.replace(/ -- $/, ''),
  note: values.note,
  admissionArgs: values['admission-arg'],
  ...(abSpecs.length > 0 ? { variants: abSpecs } : {}),
  reconcilerNodeOptions: values['reconciler-node-options'],
  scale,
  machine: machineInfo(),
  sections: {},
};

function commandArgs(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--note') i++;
    else if (!argv[i]!.startsWith('--note=')) out.push(argv[i]!);
  }
  return out;
}

/** Records sections that could not run because what they share failed to start. */
function failed(names: SectionName[], e: unknown): void {
  const error = e instanceof Error ? (e.stack ?? e.message) : String(e);
  say(`${names.join(', ')}: could not start: ${error}`);
  for (const n of names.filter(wanted))
    report.sections[n] = { loadBefore: loadAverage(), loadAfter: [], seconds: 0, error };
}

async function section<T>(name: SectionName, fn: () => Promise<T>): Promise<void> {
  if (!wanted(name)) return;
  say(`section ${name}: start (load average ${loadAverage().join(' ')})`);
  const t = timer();
  const loadBefore = loadAverage();
  const entry: SectionResult = { loadBefore, loadAfter: [], seconds: 0 };
  try {
    entry.result = await fn();
  } catch (e) {
    entry.error = e instanceof Error ? (e.stack ?? e.message) : String(e);
    say(`section ${name}: FAILED: ${entry.error}`);
  }
  entry.seconds = Math.round(t() / 100) / 10;
  entry.loadAfter = loadAverage();
  report.sections[name] = entry;
  say(`section ${name}: done in ${entry.seconds} s`);
}

say(`scale ${scale.name}, sections ${only.join(', ')}; ${report.machine.cores} cores, ${report.machine.cpuModel}`);
const cp = await startControlPlane({ log: (m) => say(`control plane: ${m}`) });
let svc: RunningAdmission | undefined;
let peer: GoPeer | undefined;
const variants: Variant[] = [];
try {
  if (wanted('admission-direct') || wanted('admission-apiserver') || wanted('admission-growth'))
    await admission().catch((e) => failed(['admission-direct', 'admission-apiserver', 'admission-growth'], e));
  if (
    wanted('fanout') ||
    wanted('in-container') ||
    wanted('kubelet-defaults') ||
    wanted('memory') ||
    wanted('reconciler-growth')
  ) {
    const env = await benchEnv(cp, 'bench-crds');
    await installCrds(env);
  }
  await section('fanout', () => fanout(cp, scale, logDir));
  await section('in-container', () => inContainer(cp, scale));
  await section('kubelet-defaults', () =>
    kubeletDefaults(cp, scale, values['kubelet-edits'] ? Number(values['kubelet-edits']) : undefined),
  );
  await section('memory', () =>
    reconcilerMemory(cp, scale, logDir, {
      ...(values['heap-snapshot'] ? { heapSnapshotDir: values['heap-snapshot'] } : {}),
      standbyVariants: values['standby-variant'].map((v) => {
        const [name = v, nodeOptions = '', env = ''] = v.split('|');
        return {
          name,
          nodeOptions,
          ...(env ? { env: Object.fromEntries(env.split(',').map((kv) => kv.split('=', 2) as [string, string])) } : {}),
        };
      }),
      ...(values['reconciler-node-options'] !== undefined
        ? { reconcilerEnv: { NODE_OPTIONS: values['reconciler-node-options'] } }
        : {}),
    }),
  );
  await section('reconciler-growth', () => reconcilerGrowth(cp, scale, logDir));
} finally {
  await svc?.stop().catch(() => undefined);
  for (const v of variants.splice(0)) await v.svc.stop().catch(() => undefined);
  await peer?.stop().catch(() => undefined);
  await cp.stop();
}

/** The admission service on a seeded namespace, then both admission sections against it. */
async function admission(): Promise<void> {
  const env = await benchEnv(cp, 'bench-adm');
  await installCrds(env);
  await seedAdmissionNamespace(env);
  const saved = process.env.NODE_OPTIONS;
  if (profDir) {
    mkdirSync(profDir, { recursive: true });
    const preload = fileURLToPath(new URL('./cpu-profile-preload.mjs', import.meta.url));
    process.env.NODE_OPTIONS = `${saved ?? ''} --import=${preload}`.trim();
    process.env.KD_BENCH_CPU_PROF_DIR = profDir;
  }
  try {
    svc = await startAdmission(env, [SHIPPED_LOG_LEVEL, ...values['admission-arg']]);
  } finally {
    if (saved === undefined) delete process.env.NODE_OPTIONS;
    else process.env.NODE_OPTIONS = saved;
    delete process.env.KD_BENCH_CPU_PROF_DIR;
  }
  const running = svc;
  for (const spec of abSpecs) {
    say(`admission A/B: starting variant ${spec.name}`);
    const v = await startAdmission(env, [SHIPPED_LOG_LEVEL, ...values['admission-arg'], ...spec.args], {
      ...(spec.root ? { root: spec.root } : {}),
      ...(spec.node ? { env: { NODE_OPTIONS: spec.node } } : {}),
    });
    variants.push({ ...spec, svc: v });
  }
  // The Go peer reads the same seeded namespace through its own informers; without it the sections still run.
  let goError: string | undefined;
  if (!values['no-go-peer'])
    peer = await startGoPeer(env, { cpu: values['no-pin'] ? undefined : 0 }).catch((e: unknown) => {
      goError = e instanceof Error ? e.message : String(e);
      say(`go peer: not measured: ${goError}`);
      return undefined;
    });
  const goPeer = peer;
  await section('admission-direct', () =>
    admissionDirect(env, running, scale.direct, {
      pin: !values['no-pin'],
      profile: !!profDir,
      peer: goPeer,
      goError,
      variants,
    }),
  );
  await section('admission-apiserver', () => admissionApiServer(cp, env, running, scale, goPeer));
  await section('admission-growth', () =>
    admissionGrowth(env, running, scale.growth, scale.direct, { pin: !values['no-pin'] }),
  );
  await svc.stop();
  svc = undefined;
  for (const v of variants.splice(0)) await v.svc.stop();
  await peer?.stop();
  peer = undefined;
  if (profDir) report.profile = summarizeProfiles(profDir, 25);
}

report.finishedAt = new Date().toISOString();
report.totalSeconds = Math.round(total() / 1000);
report.loadAverageEnd = loadAverage();

writeFileSync(join(outDir, `${name}.json`), JSON.stringify(report, null, 2) + '\n');
const mdPath = writeRendered(report, outDir);
say(`report: ${mdPath} (+ .json), ${report.totalSeconds} s in total`);
