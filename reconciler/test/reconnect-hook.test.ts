/**
 * reconnectPass with a scripted exec: what it execs where, what it writes, and that nothing is exec'd
 * once leadership has ended (the real websocket exec runs in test/node/reconnect-hook.test.ts).
 */
import { describe, expect, it } from '@jest/globals';
import {
  ANNOTATION_CONFIGMETA_GENERATOR,
  GUESTCONFIG_SIDECAR,
  RECONNECT_BACKOFF_BASE_MS,
  RECONNECT_COMMAND,
  silentLogger,
  type EventInput,
  type KDCluster,
  type PatchOp,
} from '@kd-connections/shared';
import { reconnectPass, type ExecResult, type PodExec, type ReconnectDeps } from '../src/reconnect-hook.js';
import { app, cluster, MemoryWorld, pod } from '../../shared/test/fixtures.js';

const NOW = new Date('2026-12-03T09:00:00Z');
const POD = 'c-controller-0';

function setup(hook: ExecResult, opts: { abortOn?: 'start' | 'read' } = {}) {
  const member = pod(POD, 'c', 'controller', { annotations: { [ANNOTATION_CONFIGMETA_GENERATOR]: '4' } });
  const world = new MemoryWorld({
    apps: [app('a', { defaultConfigPackage: { packageURL: 'x' }, roles: [{ id: 'controller' }] })],
    pods: [member],
  });
  const c: KDCluster = cluster('c', 'a', {
    generator: 4,
    status: { memberReconnects: { [POD]: { uid: member.metadata.uid!, generator: 3 } }, conditions: [] },
  });
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
    patchClusterStatus: async (_ns, _n, ops) => (patches.push(ops), c),
    events: { record: (e) => events.push(e) },
    onHook: (r) => hooks.push(r),
    log: silentLogger,
    now: () => NOW,
  };
  return { c, deps, calls, patches, events, hooks };
}

describe('reconnectPass', () => {
  it('reads the file in the sidecar, runs the hook in app, records the generator, posts a Normal event', async () => {
    const s = setup({ exitCode: 0, stdout: '', stderr: '' });
    expect(await reconnectPass(s.c, s.deps)).toEqual({});
    expect(s.calls).toEqual([
      `${POD}/kd-guestconfig: cat /etc/guestconfig/.configmeta-generator`,
      `${POD}/app: ${RECONNECT_COMMAND.join(' ')}`,
    ]);
    const add = s.patches[0]!.find((o) => o.op === 'add' && o.path === '/status/memberReconnects');
    expect(add).toMatchObject({ value: { [POD]: { generator: 4 } } });
    expect(s.patches[0]![0]).toMatchObject({ op: 'test', path: '/metadata/uid' });
    expect(s.events.map((e) => [e.type, e.reason, e.regarding.name])).toEqual([['Normal', 'Reconnected', POD]]);
    expect(s.hooks).toEqual(['ok']);
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
    expect(s.hooks).toEqual(['failed']);
  });

  it('execs nothing once leadership has ended, and stops before the hook when it ends mid-pass', async () => {
    const before = setup({ exitCode: 0, stdout: '', stderr: '' }, { abortOn: 'start' });
    await expect(reconnectPass(before.c, before.deps)).rejects.toMatchObject({ name: 'AbortError' });
    expect(before.calls).toEqual([]);
    expect(before.patches).toEqual([]);

    const during = setup({ exitCode: 0, stdout: '', stderr: '' }, { abortOn: 'read' });
    await expect(reconnectPass(during.c, during.deps)).rejects.toMatchObject({ name: 'AbortError' });
    expect(during.calls).toEqual([`${POD}/kd-guestconfig: cat /etc/guestconfig/.configmeta-generator`]);
    expect(during.patches).toEqual([]);
    expect(during.events).toEqual([]);
  });
});
