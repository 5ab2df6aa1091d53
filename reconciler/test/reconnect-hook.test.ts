/**
 * reconnectPass with a scripted exec: what it execs where, what it writes, and that nothing is exec'd
 * once leadership has ended (the real websocket exec runs in test/node/reconnect-hook.test.ts).
 */
import { describe, expect, it } from '@jest/globals';
import {
  ANNOTATION_CONFIGMETA_GENERATOR,
  ANNOTATION_CONFIGMETA_ROSTER,
  GUESTCONFIG_SIDECAR,
  type KDCluster,
} from '@kd-connections/shared/domain';
import {
  FILE_RECHECK_MS,
  READ_FILES_COMMAND,
  rosterDigest,
  rosterOf,
  RECONNECT_BACKOFF_BASE_MS,
  RECONNECT_COMMAND,
} from '@kd-connections/shared/plan';
import { type PatchOp } from '@kd-connections/shared/primitives';
import { KubeApiError, silentLogger, type EventInput } from '@kd-connections/shared/runtime';
import {
  LimitedPodExec,
  reconnectPass,
  type ExecResult,
  type PodExec,
  type ReconnectDeps,
} from '../src/reconnect-hook.js';
import { RetryableError } from '../src/reconcile.js';
import { app, cluster, MemoryWorld, pod, secret } from '../../shared/test/fixtures.js';

const NOW = new Date('2026-12-03T09:00:00Z');
const POD = 'c-controller-0';

const TOKEN = 'tok-9f4e2c1d';

function setup(hook: ExecResult, opts: { abortOn?: 'start' | 'read'; conflicts?: number } = {}) {
  const member = pod(POD, 'c', 'controller', { annotations: { [ANNOTATION_CONFIGMETA_GENERATOR]: '4' } });
  const world = new MemoryWorld({
    apps: [app('a', { defaultConfigPackage: { packageURL: 'x' }, roles: [{ id: 'controller' }] })],
    pods: [member],
    secrets: [secret('creds', 'scm', { token: TOKEN }, { withValues: true })],
  });
  const c: KDCluster = cluster('c', 'a', {
    generator: 4,
    connections: { secrets: ['creds'] },
    status: { memberReconnects: { [POD]: { uid: member.metadata.uid!, generator: 3 } }, conditions: [] },
  });
  let conflicts = opts.conflicts ?? 0;
  const reads: string[] = [];
  const leadership = new AbortController();
  if (opts.abortOn === 'start') leadership.abort();
  const calls: string[] = [];
  const exec: PodExec = {
    run: async (_ns, p, container, command) => {
      calls.push(`${p}/${container}: ${command.join(' ')}`);
      if (container === GUESTCONFIG_SIDECAR) {
        if (opts.abortOn === 'read') leadership.abort();
        return { exitCode: 0, stdout: '4\n', stderr: '' };
      }
      return hook;
    },
  };
  const patches: PatchOp[][] = [];
  const events: EventInput[] = [];
  const hooks: string[] = [];
  const deps: ReconnectDeps = {
    exec,
    world,
    systemNamespace: 'kd-system',
    timeoutMs: 5000,
    concurrency: 2,
    signal: leadership.signal,
    check: () => {},
    patchClusterStatus: async (_ns, _n, ops) => {
      patches.push(ops);
      if (conflicts-- > 0) throw new KubeApiError(409, 'Conflict', 'the object has been modified');
      return c;
    },
    readCluster: async (_ns, n) => {
      reads.push(n);
      return structuredClone(c);
    },
    events: { record: (e) => events.push(e) },
    onHook: (r, hook) => hooks.push(`${r} ${hook}`),
    log: silentLogger,
    now: () => NOW,
  };
  return { c, deps, calls, patches, events, hooks, reads };
}

describe('reconnectPass', () => {
  it('reads the file in the sidecar, runs the hook in app, records the generator, posts a Normal event', async () => {
    const s = setup({ exitCode: 0, stdout: '', stderr: '' });
    expect(await reconnectPass(s.c, s.deps)).toEqual({});
    expect(s.calls).toEqual([
      `${POD}/kd-guestconfig: ${READ_FILES_COMMAND.join(' ')}`,
      `${POD}/app: ${RECONNECT_COMMAND.join(' ')}`,
    ]);
    const add = s.patches[0]!.find((o) => o.op === 'add' && o.path === '/status/memberReconnects');
    expect(add).toMatchObject({ value: { [POD]: { generator: 4 } } });
    expect(s.patches[0]![0]).toMatchObject({ op: 'test', path: '/metadata/uid' });
    expect(s.events.map((e) => [e.type, e.reason, e.regarding.name])).toEqual([['Normal', 'Reconnected', POD]]);
    expect(s.hooks).toEqual(['ok reconnect']);
  });

  it('a failure is recorded, reported, and comes back through the queue after the backoff', async () => {
    const s = setup({ exitCode: 7, stdout: '', stderr: 'no route to broker\n' });
    expect(await reconnectPass(s.c, s.deps)).toEqual({ requeueAfterMs: RECONNECT_BACKOFF_BASE_MS });
    const add = s.patches[0]!.find((o) => o.op === 'add' && o.path === '/status/memberReconnects');
    expect(add).toMatchObject({ value: { [POD]: { generator: 3, failedGenerator: 4, failures: 1 } } });
    const cond = s.patches[0]!.find((o) => o.op === 'add' && o.path === '/status/conditions') as { value: any[] };
    expect(cond.value[0]).toMatchObject({ type: 'MembersReconnected', status: 'False', reason: 'ReconnectFailed' });
    expect(s.events[0]).toMatchObject({ type: 'Warning', reason: 'ReconnectFailed', regarding: { name: POD } });
    expect(s.events[0]!.note).toContain('no route to broker');
    expect(s.hooks).toEqual(['failed reconnect']);
  });

  it('execs nothing once leadership has ended, and stops before the hook when it ends mid-pass', async () => {
    const before = setup({ exitCode: 0, stdout: '', stderr: '' }, { abortOn: 'start' });
    await expect(reconnectPass(before.c, before.deps)).rejects.toMatchObject({ name: 'AbortError' });
    expect(before.calls).toEqual([]);
    expect(before.patches).toEqual([]);

    const during = setup({ exitCode: 0, stdout: '', stderr: '' }, { abortOn: 'read' });
    await expect(reconnectPass(during.c, during.deps)).rejects.toMatchObject({ name: 'AbortError' });
    expect(during.calls).toEqual([`${POD}/kd-guestconfig: ${READ_FILES_COMMAND.join(' ')}`]);
    expect(during.patches).toEqual([]);
    expect(during.events).toEqual([]);
  });

  it("a hook's stderr reaches the event and the log bounded, on one line, without the connected Secret's values", async () => {
    const b64 = Buffer.from(TOKEN).toString('base64');
    const stderr = `${'x'.repeat(5000)}\nusing ${TOKEN} (${b64})\u001b[31m\nrefused\n`;
    const s = setup({ exitCode: 1, stdout: '', stderr });
    await reconnectPass(s.c, s.deps);
    const note = s.events[0]!.note;
    expect(note).not.toContain(TOKEN);
    expect(note).not.toContain(b64);
    expect(note).toContain('using [redacted] ([redacted]) [31m refused');
    expect(note).toContain(`the last 4096 characters are in the reconciler's log line "reconnect hook ran"`);
    expect(note.length).toBeLessThan(700);
    // eslint-disable-next-line no-control-regex -- asserting that no control character is left
    expect(note).not.toMatch(/[\u0000-\u001f]/);
  });

  it('a value that is not UTF-8 is masked as stored (the base64 configmeta carries)', async () => {
    const s = setup({ exitCode: 1, stdout: '', stderr: '' });
    const binary = Buffer.from([0xff, 0xfe, 0x00, 0x81, 0x41, 0x42]).toString('base64');
    const world = s.deps.world as MemoryWorld;
    world.addSecret({ ...secret('creds', 'scm', {}, { withValues: true }), keys: ['der'], data: { der: binary } });
    const exec = s.deps.exec;
    s.deps.exec = {
      run: async (...a) => {
        const r = await exec.run(...a);
        return a[2] === 'app' ? { ...r, stderr: `key: ${binary}\n` } : r;
      },
    };
    await reconnectPass(s.c, s.deps);
    expect(s.events[0]!.note).not.toContain(binary);
    expect(s.events[0]!.note).toContain('key: [redacted]');
  });

  it('a status write refused because the delivery pass wrote meanwhile is made again on a fresh read, never by running the hooks again', async () => {
    const twice = setup({ exitCode: 0, stdout: '', stderr: '' }, { conflicts: 2 });
    expect(await reconnectPass(twice.c, twice.deps)).toEqual({});
    expect(twice.patches).toHaveLength(3);
    expect(twice.reads).toEqual(['c', 'c']);
    expect(twice.calls.filter((c) => c.includes('/app:'))).toHaveLength(1);

    const always = setup({ exitCode: 0, stdout: '', stderr: '' }, { conflicts: 99 });
    await expect(reconnectPass(always.c, always.deps)).rejects.toBeInstanceOf(RetryableError);
    expect(always.patches).toHaveLength(3);
  });
});

describe('reconnectPass: --addnodes/--delnodes', () => {
  const fqdn = (i: number) => `c-controller-${i}.c.ns.svc.cluster.local`;
  const SECOND = 'c-controller-1';

  /** c-controller-0 was set up with itself alone; the last delivery recorded c-controller-1 beside it. */
  function grown(
    sidecarRoster: string | undefined,
    hook: ExecResult = { exitCode: 0, stdout: '', stderr: '' },
    delivered = 4,
  ) {
    const two = rosterOf([0, 1].map((i) => ({ role: 'controller', fqdn: fqdn(i) })));
    const annotations = {
      [ANNOTATION_CONFIGMETA_GENERATOR]: String(delivered),
      [ANNOTATION_CONFIGMETA_ROSTER]: rosterDigest(two),
    };
    const first = pod(POD, 'c', 'controller', { annotations });
    const world = new MemoryWorld({
      apps: [app('a', { defaultConfigPackage: { packageURL: 'x' }, roles: [{ id: 'controller' }] })],
      pods: [first, pod(SECOND, 'c', 'controller', { annotations })],
    });
    const c: KDCluster = cluster('c', 'a', {
      generator: 4,
      status: {
        seatHolders: { [POD]: { role: 'controller', fqdn: fqdn(0) }, [SECOND]: { role: 'controller', fqdn: fqdn(1) } },
        rosterChanges: { seq: 0, roster: { controller: [fqdn(0)] }, changes: [] },
        memberReconnects: { [POD]: { uid: first.metadata.uid!, generator: 4, rosterSeq: 0 } },
        conditions: [],
      },
    });
    const calls: string[] = [];
    const patches: PatchOp[][] = [];
    const events: EventInput[] = [];
    const hooks: string[] = [];
    const deps: ReconnectDeps = {
      exec: {
        run: async (_ns, p, container, command) => {
          calls.push(`${p}/${container}: ${command.join(' ')}`);
          if (container !== GUESTCONFIG_SIDECAR) return hook;
          return { exitCode: 0, stdout: `${delivered}\n${sidecarRoster ?? '-'}`, stderr: '' };
        },
      },
      world,
      systemNamespace: 'kd-system',
      timeoutMs: 5000,
      concurrency: 2,
      signal: new AbortController().signal,
      check: () => {},
      patchClusterStatus: async (_ns, _n, ops) => {
        patches.push(ops);
        return c;
      },
      readCluster: async () => structuredClone(c),
      events: { record: (e) => events.push(e) },
      onHook: (r, h) => hooks.push(`${r} ${h}`),
      log: silentLogger,
      now: () => NOW,
    };
    const added = (path: string) =>
      (patches[0]?.find((o) => o.op === 'add' && o.path === path) as { value: any } | undefined)?.value;
    return { c, deps, calls, events, hooks, added, digest: rosterDigest(two) };
  }

  it('runs KubeDirector’s --addnodes once the file lists the new member; records it and the journal', async () => {
    const s = grown(undefined);
    const current = grown(s.digest);
    expect(await reconnectPass(current.c, current.deps)).toEqual({});
    expect(current.calls.filter((c) => c.includes('/app:'))).toEqual([
      `${POD}/app: sh -c /opt/guestconfig/*/startscript "$@" startscript --addnodes --nodegroup 1 --role controller --fqdns ${fqdn(1)}`,
    ]);
    expect(current.hooks).toEqual(['ok addnodes']);
    expect(current.added('/status/memberReconnects')[POD]).toEqual({
      uid: expect.any(String),
      generator: 4,
      rosterSeq: 1,
    });
    // The second member's first document listed both: its baseline is the change it came with.
    expect(current.added('/status/memberReconnects')[SECOND]).toMatchObject({ rosterSeq: 1 });
    // Everyone has heard of change 1: the journal keeps the roster, not the change.
    expect(current.added('/status/rosterChanges')).toEqual({
      seq: 1,
      roster: { controller: [fqdn(0), fqdn(1)] },
      changes: [],
    });
    expect(current.events.map((e) => [e.type, e.reason, e.action, e.regarding.name])).toEqual([
      ['Normal', 'Notified', 'AddNodes', POD],
    ]);
    const conditions = current.added('/status/conditions') as { type: string; status: string }[];
    expect(conditions.map((c) => [c.type, c.status])).toEqual([
      ['MembersReconnected', 'True'],
      ['MembersNotified', 'True'],
    ]);
  });

  it('a membership change and a new generator for one member: --addnodes, then --reconnect, both recorded', async () => {
    const both = grown(grown(undefined).digest, undefined, 5);
    expect(await reconnectPass(both.c, both.deps)).toEqual({});
    expect(both.calls.filter((c) => c.includes('/app:')).map((c) => c.split(' ').at(-1))).toEqual([
      fqdn(1),
      '--reconnect',
    ]);
    expect(both.hooks).toEqual(['ok addnodes', 'ok reconnect']);
    expect(both.added('/status/memberReconnects')[POD]).toEqual({
      uid: expect.any(String),
      generator: 5,
      rosterSeq: 1,
    });
  });

  it('waits while the file lists the older roster: nothing runs, the change stays in the journal, a look again soon', async () => {
    const s = grown(rosterDigest({ controller: [fqdn(0)] }));
    expect(await reconnectPass(s.c, s.deps)).toEqual({ requeueAfterMs: FILE_RECHECK_MS });
    expect(s.calls.filter((c) => c.includes('/app:'))).toEqual([]);
    expect(s.added('/status/memberReconnects')[POD]).toMatchObject({ rosterSeq: 0 });
    expect(s.added('/status/rosterChanges').changes).toEqual([
      { seq: 1, op: 'addnodes', role: 'controller', fqdns: [fqdn(1)], roster: s.digest },
    ]);
  });

  it('a failing notification is reported by exit code and retried after the backoff', async () => {
    const s = grown(undefined);
    const failing = grown(s.digest, { exitCode: 5, stdout: '', stderr: 'peer unknown\n' });
    expect(await reconnectPass(failing.c, failing.deps)).toEqual({ requeueAfterMs: RECONNECT_BACKOFF_BASE_MS });
    expect(failing.added('/status/memberReconnects')[POD]).toMatchObject({
      rosterSeq: 0,
      changeFailure: { seq: 1, failures: 1, message: '--addnodes for role controller: exit code 5' },
    });
    expect(failing.events[0]).toMatchObject({ type: 'Warning', reason: 'NotifyFailed', regarding: { name: POD } });
    expect(failing.events[0]!.note).toContain('exit code 5');
    expect(failing.events[0]!.note).toContain('peer unknown');
    expect(failing.hooks).toEqual(['failed addnodes']);
  });

  it('a status from before seat holders were recorded: no journal, no membership hook; --reconnect still runs', async () => {
    const s = grown(grown(undefined).digest, undefined, 5);
    delete s.c.status!.seatHolders;
    delete s.c.status!.rosterChanges;
    expect(await reconnectPass(s.c, s.deps)).toEqual({});
    expect(s.hooks).toEqual(['ok reconnect']);
    expect(s.added('/status/rosterChanges')).toBeUndefined();
    expect(s.added('/status/memberReconnects')[POD]).toMatchObject({ generator: 5, rosterSeq: 0 });
  });

  it('a sidecar injected before the roster file: nothing runs, the member is moved on and not read again', async () => {
    const s = grown(undefined);
    expect(await reconnectPass(s.c, s.deps)).toEqual({});
    expect(s.calls.filter((c) => c.includes('/app:'))).toEqual([]);
    expect(s.added('/status/memberReconnects')[POD]).toMatchObject({ rosterSeq: 1 });
  });
});

describe('LimitedPodExec', () => {
  it('never has more than its limit in flight; a waiting run leaves when its signal fires', async () => {
    let active = 0;
    let most = 0;
    const release: (() => void)[] = [];
    const inner: PodExec = {
      run: async () => {
        most = Math.max(most, ++active);
        await new Promise<void>((r) => release.push(r));
        active--;
        return { exitCode: 0, stdout: '', stderr: '' };
      },
    };
    const limited = new LimitedPodExec(inner, 2);
    const run = (signal: AbortSignal) => limited.run('ns', 'p', 'app', ['true'], { timeoutMs: 1000, signal });
    const live = new AbortController();
    const gone = new AbortController();
    const runs = [run(live.signal), run(live.signal), run(live.signal)];
    const waiting = run(gone.signal);
    await new Promise((r) => setImmediate(r));
    expect(limited.inFlight).toBe(2);
    gone.abort();
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
    while (release.length > 0 || limited.inFlight > 0) {
      release.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    await expect(Promise.all(runs)).resolves.toHaveLength(3);
    expect(most).toBe(2);
  });
});
