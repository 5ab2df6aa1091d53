/**
 * The reconnect signal's I/O (the decisions are shared's plan-reconnect.ts): read the generator file of
 * the members that may need the hook (exec `cat` in the `kd-guestconfig` sidecar, which works for app
 * images without a shell), run KubeDirector's `startscript --reconnect` in the `app` container of those
 * whose file holds a newer generator, and record the outcome in status with one guarded JSON Patch.
 *
 * Unlike KubeDirector (which starts the hook with nohup and never learns how it ended) the run is
 * waited for, up to --reconnect-timeout; then the stream is dropped and the run counts as failed (the
 * process may still be running in the container: Kubernetes has no way to signal an exec'd process).
 * Exec goes over client-node's websocket, not the scoped API client, so leadership is checked before
 * every exec and its end cuts the streams in flight.
 */
import { PassThrough, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { Exec, KubeConfig, V1Status } from '@kubernetes/client-node';
import type { WebSocketHandler } from '@kubernetes/client-node/dist/web-socket-handler.js';
import {
  GENERATOR_FILE,
  GUESTCONFIG_DIR,
  GUESTCONFIG_SIDECAR,
  resolveApp,
  type KDApp,
  type RosterJournal,
  type KDCluster,
  type World,
} from '@kd-connections/shared/domain';
import {
  HOOK_LOG_CHARS,
  hookOutputExcerpt,
  planReconnectReads,
  planReconnectRuns,
  reconnectCondition,
  reconnectEvents,
  reconnectMembersOf,
  reconnectStatusPatch,
  recordReconnectResults,
  nextReconnectCheckMs,
  rolesWithConfigPackage,
  RECONNECT_COMMAND,
  RECONNECT_CONTAINER,
  type FileRead,
  type HookOutcome,
  journalRoster,
  notifyCommand,
  notifyCondition,
  notifyEvents,
  planNotifications,
  recordNotifyResults,
  rosterOf,
  subscribedEvents,
  trimJournal,
  type NotifyResult,
  type NotifyRun,
  RECONNECT_STARTSCRIPT,
  READ_FILES_COMMAND,
  type HookResult,
  type MemberReconnects,
} from '@kd-connections/shared/plan';
import { type PatchOp } from '@kd-connections/shared/primitives';
import { errorMessage, isConflict, type EventInput, type Logger } from '@kd-connections/shared/runtime';
import { RetryableError } from './reconcile.js';

/** How an exec ended: the exit code when the command ran to its end, else why not. */
export interface ExecResult {
  exitCode?: number;
  stdout: string;
  stderr: string;
  /** Set when the run was abandoned at the bound (milliseconds). */
  timedOutMs?: number;
  /** The exec itself failed (pod or container gone, not running, refused). */
  error?: string;
}

export interface PodExec {
  run(
    namespace: string,
    pod: string,
    container: string,
    command: string[],
    opts: { timeoutMs: number; signal: AbortSignal },
  ): Promise<ExecResult>;
}

const KEEP_CHARS = 4096;

/** A sink keeping the last KEEP_CHARS characters written to it (a character split across chunks kept whole). */
class TailSink extends Writable {
  text = '';
  private readonly decoder = new StringDecoder('utf8');
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.text = (this.text + this.decoder.write(chunk)).slice(-KEEP_CHARS);
    done();
  }
}

function exitCodeOf(s: V1Status | undefined): { exitCode?: number; error?: string } {
  if (!s) return { error: 'the stream closed without a status' };
  if (s.status === 'Success') return { exitCode: 0 };
  const cause = s.details?.causes?.find((c) => c.reason === 'ExitCode');
  const code = Number(cause?.message);
  if (Number.isInteger(code)) return { exitCode: code };
  return { error: s.message ?? s.reason ?? 'exec failed' };
}

function abortError(): Error {
  return Object.assign(new Error('exec cut short: leadership ended'), { name: 'AbortError' });
}

interface ExecClient {
  kc: KubeConfig;
  Exec: typeof Exec;
  WebSocketHandler: typeof WebSocketHandler;
}

/**
 * Exec over the API server's pods/exec subresource (websocket), bounded by a timeout and a signal.
 * client-node (its Exec, its KubeConfig) is imported on the first run: a reconciler without the hook
 * never loads it (kubeconfig.ts says what that saves).
 */
export class WebSocketPodExec implements PodExec {
  private loaded: Promise<ExecClient> | undefined;

  constructor(private readonly kubeConfig: () => Promise<KubeConfig>) {}

  private load(): Promise<ExecClient> {
    return (this.loaded ??= (async () => {
      const [kc, cn, ws] = await Promise.all([
        this.kubeConfig(),
        import('@kubernetes/client-node'),
        import('@kubernetes/client-node/dist/web-socket-handler.js'),
      ]);
      return { kc, Exec: cn.Exec, WebSocketHandler: ws.WebSocketHandler };
    })());
  }

  async run(...[namespace, pod, container, command, opts]: Parameters<PodExec['run']>): Promise<ExecResult> {
    let client: ExecClient;
    try {
      client = await this.load();
    } catch (e) {
      this.loaded = undefined;
      return { stdout: '', stderr: '', error: `exec unavailable: ${errorMessage(e)}` };
    }
    const { kc, Exec, WebSocketHandler } = client;
    const out = new TailSink();
    const err = new TailSink();
    // The handler's own streams default to this process's stdio (it ends them on a close frame).
    const handler = new WebSocketHandler(kc, undefined, { stdin: new PassThrough(), stdout: out, stderr: err });
    let status: V1Status | undefined;
    return new Promise<ExecResult>((resolve, reject) => {
      let socket: { terminate(): void } | undefined;
      let done = false;
      const finish = (f: () => void) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        opts.signal.removeEventListener('abort', onAbort);
        socket?.terminate();
        f();
      };
      const onAbort = () => finish(() => reject(abortError()));
      const timer = setTimeout(
        () => finish(() => resolve({ stdout: out.text, stderr: err.text, timedOutMs: opts.timeoutMs })),
        opts.timeoutMs,
      );
      if (opts.signal.aborted) return onAbort();
      opts.signal.addEventListener('abort', onAbort, { once: true });
      new Exec(kc, handler)
        .exec(namespace, pod, container, command, out, err, null, false, (s) => (status = s))
        .then((ws) => {
          if (done) return ws.terminate();
          socket = ws;
          ws.on('close', () => finish(() => resolve({ stdout: out.text, stderr: err.text, ...exitCodeOf(status) })));
        })
        .catch((e: unknown) => finish(() => resolve({ stdout: '', stderr: '', error: errorMessage(e) })));
    });
  }
}

/**
 * At most `limit` execs in flight across every cluster's pass (--reconnect-concurrency): hooks that hang
 * until their timeout hold these slots, never a delivery worker. A run waiting for a slot leaves when its
 * signal fires.
 */
export class LimitedPodExec implements PodExec {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly inner: PodExec,
    private readonly limit: number,
  ) {}

  get inFlight(): number {
    return this.active;
  }

  async run(...args: Parameters<PodExec['run']>): Promise<ExecResult> {
    const { signal } = args[4];
    while (this.active >= this.limit) {
      if (signal.aborted) throw abortError();
      await new Promise<void>((resolve) => {
        const wake = () => {
          signal.removeEventListener('abort', wake);
          const i = this.waiting.indexOf(wake);
          if (i >= 0) this.waiting.splice(i, 1);
          resolve();
        };
        this.waiting.push(wake);
        signal.addEventListener('abort', wake, { once: true });
      });
    }
    if (signal.aborted) throw abortError();
    this.active++;
    try {
      return await this.inner.run(...args);
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

/** A file read never waits long: the sidecar only has to `cat` a small file. */
const READ_TIMEOUT_MS = 10_000;

export type HookMetric = 'ok' | 'failed' | 'timeout' | 'error';
export type HookName = 'reconnect' | 'addnodes' | 'delnodes';

export interface ReconnectDeps {
  exec: PodExec;
  world: World;
  systemNamespace: string;
  timeoutMs: number;
  concurrency: number;
  /** Leadership: `check` may abort `signal`; nothing is exec'd once it fired. */
  signal: AbortSignal;
  check: () => void;
  patchClusterStatus(namespace: string, name: string, ops: PatchOp[]): Promise<KDCluster>;
  /** A live read of the cluster (undefined: gone), to record the hooks' results after a conflict. */
  readCluster(namespace: string, name: string): Promise<KDCluster | undefined>;
  events: { record(e: EventInput): void };
  onHook?: (result: HookMetric, hook: HookName) => void;
  log: Logger;
  now?: () => Date;
}

async function mapLimit<T, R>(items: T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let i = 0;
  const worker = async () => {
    for (let j = i++; j < items.length; j = i++) results[j] = await fn(items[j]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

function execGuarded(d: ReconnectDeps, ...args: Parameters<PodExec['run']>): Promise<ExecResult> {
  d.check();
  if (d.signal.aborted) return Promise.reject(abortError());
  return d.exec.run(...args);
}

async function readFiles(d: ReconnectDeps, namespace: string, pod: string): Promise<FileRead> {
  const file = `${GUESTCONFIG_DIR}/${GENERATOR_FILE}`;
  const r = await execGuarded(d, namespace, pod, GUESTCONFIG_SIDECAR, READ_FILES_COMMAND, {
    timeoutMs: Math.min(READ_TIMEOUT_MS, d.timeoutMs),
    signal: d.signal,
  });
  if (r.exitCode === 0) {
    const [text = '', roster = ''] = r.stdout.split('\n').map((l) => l.trim());
    const n = Number(text);
    if (/^\d+$/.test(text) && Number.isSafeInteger(n)) return { generator: n, ...(roster === '-' ? {} : { roster }) };
    return { error: `${file} holds ${JSON.stringify(text.slice(0, 40))}, not a generator` };
  }
  if (r.timedOutMs !== undefined) return { error: `reading ${file} took over ${r.timedOutMs} ms` };
  return { error: r.error ?? `cat ${file} exited ${r.exitCode}: ${r.stderr.trim().slice(-200)}` };
}

/**
 * The values of the Secrets the cluster connects, which no hook output may carry out of the pod: decoded,
 * and as stored (base64 of the exact bytes, what configmeta carries, also for a value that is not UTF-8).
 */
async function connectedSecretValues(cluster: KDCluster, world: World): Promise<string[]> {
  const namespace = cluster.metadata.namespace ?? '';
  const values: string[] = [];
  for (const name of cluster.spec?.connections?.secrets ?? []) {
    const s = typeof name === 'string' ? await world.getSecret(namespace, name) : undefined;
    for (const v of Object.values(s?.data ?? {})) values.push(Buffer.from(v, 'base64').toString('utf8'), v);
  }
  return values;
}

async function runHook(
  d: ReconnectDeps,
  namespace: string,
  pod: string,
  hook: HookName,
  command: string[],
  secrets: string[],
): Promise<HookOutcome> {
  const r = await execGuarded(d, namespace, pod, RECONNECT_CONTAINER, command, {
    timeoutMs: d.timeoutMs,
    signal: d.signal,
  });
  const stderrTail = hookOutputExcerpt(r.stderr, secrets, HOOK_LOG_CHARS);
  const tail = stderrTail ? { stderrTail } : {};
  if (r.exitCode === 0) {
    d.onHook?.('ok', hook);
    return { ok: true };
  }
  if (r.timedOutMs !== undefined) {
    d.onHook?.('timeout', hook);
    return { ok: false, timedOutMs: r.timedOutMs, ...tail };
  }
  if (r.exitCode !== undefined) {
    d.onHook?.('failed', hook);
    return { ok: false, exitCode: r.exitCode, ...tail };
  }
  d.onHook?.('error', hook);
  return { ok: false, error: r.error ?? 'exec failed', ...tail };
}

/** Status patches of one pass's record at most: the first, and one per fresher read after a conflict. */
const RECORD_ATTEMPTS = 3;

/**
 * Records what the hooks did. The hooks have run by now, so a conflict (the delivery pass wrote status
 * meanwhile: the two run side by side) is answered by reading the cluster again and patching the same
 * record onto it — a requeue would run the hooks a second time. Only after RECORD_ATTEMPTS is the
 * record lost (the next pass then runs them again).
 */
async function writeRecord(
  cluster: KDCluster,
  record: MemberReconnects,
  journal: RosterJournal | undefined,
  now: Date,
  d: ReconnectDeps,
): Promise<void> {
  const namespace = cluster.metadata.namespace ?? '';
  const name = cluster.metadata.name ?? '';
  let current = cluster;
  for (let attempt = 1; ; attempt++) {
    const generation = current.metadata.generation;
    const conditions = [reconnectCondition(record, generation), notifyCondition(record, generation)];
    const ops = reconnectStatusPatch(current, record, conditions, now.toISOString(), journal);
    if (ops.length === 0) return;
    try {
      await d.patchClusterStatus(namespace, name, ops);
      return;
    } catch (e) {
      if (!isConflict(e)) throw e;
      const fresh = attempt < RECORD_ATTEMPTS ? await d.readCluster(namespace, name) : undefined;
      if (!fresh || fresh.metadata.uid !== cluster.metadata.uid)
        throw new RetryableError(`reconnect state of ${namespace}/${name} moved on since it was read`);
      current = fresh;
    }
  }
}

/**
 * The membership journal as of the roster the last delivery recorded (status.seatHolders); undefined
 * before any delivery recorded one.
 */
function journalOf(cluster: KDCluster, app: KDApp): RosterJournal | undefined {
  const holders = cluster.status?.seatHolders;
  if (!holders) return cluster.status?.rosterChanges;
  const order = (app.spec.roles ?? []).map((r) => r.id);
  return journalRoster(cluster.status?.rosterChanges, rosterOf(Object.values(holders)), order);
}

/**
 * One member's hooks, in order: the membership changes it has not heard of (each once, the first failure
 * ends its turn), then --reconnect for the generator its file holds.
 */
async function memberHooks(
  d: ReconnectDeps,
  namespace: string,
  pod: string,
  notify: NotifyRun | undefined,
  reconnect: { generator: number } | undefined,
  secrets: string[],
): Promise<{ notified?: NotifyResult; reconnected?: HookResult }> {
  const out: { notified?: NotifyResult; reconnected?: HookResult } = {};
  if (notify) {
    const ran: NotifyResult['ran'] = [];
    for (const change of notify.changes) {
      const outcome = await runHook(
        d,
        namespace,
        pod,
        change.op,
        notifyCommand(RECONNECT_STARTSCRIPT, change),
        secrets,
      );
      ran.push({ change, outcome });
      if (!outcome.ok) break;
    }
    out.notified = { pod, through: notify.through, ran };
    if (ran.some((r) => !r.outcome.ok)) return out;
  }
  if (reconnect) {
    const outcome = await runHook(d, namespace, pod, 'reconnect', RECONNECT_COMMAND, secrets);
    out.reconnected = { pod, generator: reconnect.generator, outcome };
  }
  return out;
}

/**
 * One pass over `cluster` (the newest copy this reconcile holds): KubeDirector's --addnodes/--delnodes for
 * membership changes and --reconnect for connection changes, each once per change per member, once its
 * file holds the document with the change. Returns when to look again: a file not swapped yet, or a failed
 * hook's backoff. A refused status write throws (the queue retries).
 */
export async function reconnectPass(cluster: KDCluster, d: ReconnectDeps): Promise<{ requeueAfterMs?: number }> {
  const namespace = cluster.metadata.namespace ?? '';
  const name = cluster.metadata.name ?? '';
  const own = await resolveApp(d.world, namespace, cluster.spec ?? {}, d.systemNamespace);
  // Without the app the roles with a config package are unknown: keep the recorded state as it is.
  if (!own) return {};
  const now = (d.now ?? (() => new Date()))();
  const members = reconnectMembersOf(name, await d.world.podsOf(namespace, name), cluster.status?.seatHolders);
  const journal = journalOf(cluster, own.app);
  const reads = planReconnectReads(
    members,
    cluster.status?.memberReconnects,
    rolesWithConfigPackage(own.app),
    now,
    journal,
  );
  const files: Record<string, FileRead> = {};
  await mapLimit(reads.read, d.concurrency, async (pod) => {
    files[pod] = await readFiles(d, namespace, pod);
  });
  const runs = planReconnectRuns(reads.record, files);
  const readable = Object.fromEntries(
    Object.entries(files).flatMap(([pod, f]) => ('error' in f ? [] : [[pod, f] as const])),
  );
  const notes = planNotifications(reads.record, readable, journal, reads.roles, subscribedEvents(own.app));
  const log = d.log.child({ cluster: `${namespace}/${name}` });
  for (const [pod, why] of Object.entries(runs.unreadable))
    log.info('reconnect: cannot read the member generator file; not running its hook', { pod, why });
  let record = reads.record;
  for (const pod of notes.noRosterFile) {
    log.warn(
      'membership change not announced: the pod was injected before kd-guestconfig wrote its roster file; recreate it to get --addnodes/--delnodes',
      { pod },
    );
    record = { ...record, [pod]: { ...record[pod]!, rosterSeq: journal!.seq } };
  }
  for (const n of notes.run)
    if (n.missed > 0)
      log.warn('membership changes dropped from the journal before this member heard of them', {
        pod: n.pod,
        missed: n.missed,
      });
  const notifyOf = new Map(notes.run.map((n) => [n.pod, n]));
  const reconnectOf = new Map(runs.run.map((r) => [r.pod, r]));
  const pods = [...new Set([...notifyOf.keys(), ...reconnectOf.keys()])].sort();
  const hooked = pods.some((p) => reconnectOf.has(p) || (notifyOf.get(p)?.changes.length ?? 0) > 0);
  const secrets = hooked ? await connectedSecretValues(cluster, d.world) : [];
  const done = await mapLimit(pods, d.concurrency, (pod) =>
    memberHooks(d, namespace, pod, notifyOf.get(pod), reconnectOf.get(pod), secrets),
  );
  const notified = done.flatMap((r) => (r.notified ? [r.notified] : []));
  const results = done.flatMap((r) => (r.reconnected ? [r.reconnected] : []));
  record = recordReconnectResults(recordNotifyResults(record, notified, now), results, now);
  for (const e of reconnectEvents(cluster, members, results, record)) d.events.record(e);
  const uidOf = new Map(members.map((m) => [m.pod, m.uid]));
  const stderr = (o: HookOutcome) =>
    !o.ok && o.stderrTail
      ? `; end of stderr (connected Secret values masked; the last ${HOOK_LOG_CHARS} characters are in the reconciler's log line "membership hook ran"): ${hookOutputExcerpt(o.stderrTail, [])}`
      : '';
  const describe = { startscript: RECONNECT_STARTSCRIPT, container: RECONNECT_CONTAINER, stderr };
  for (const e of notifyEvents(cluster, (p) => uidOf.get(p), notified, record, describe)) d.events.record(e);
  for (const r of results) logHook(log, 'reconnect hook ran', r.pod, r.outcome, { generator: r.generator });
  for (const n of notified)
    for (const { change, outcome } of n.ran)
      logHook(log, 'membership hook ran', n.pod, outcome, { op: change.op, role: change.role, change: change.seq });
  await writeRecord(cluster, record, journal && trimJournal(journal, record), now, d);
  const next = nextReconnectCheckMs(members, record, new Set(Object.keys(runs.unreadable)), now, journal);
  return next === undefined ? {} : { requeueAfterMs: next };
}

function logHook(log: Logger, msg: string, pod: string, outcome: HookOutcome, fields: Record<string, unknown>): void {
  const stderr = outcome.ok ? undefined : outcome.stderrTail;
  log[outcome.ok ? 'info' : 'warn'](msg, { pod, ...fields, ok: outcome.ok, ...(stderr ? { stderr } : {}) });
}
