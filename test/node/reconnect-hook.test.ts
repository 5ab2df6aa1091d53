/**
 * KubeDirector's change signal in running containers: with --reconnect-hook the reconciler reads the
 * generator a member's file holds (exec `cat /etc/guestconfig/.configmeta-generator` in the kd-guestconfig
 * sidecar) and runs the app's `/opt/guestconfig/<pkg>/startscript --reconnect` in the `app` container once
 * per new generator — not on the first delivery, never for a role without a config package. A failing
 * hook gives an event naming the pod and a condition, and is retried; a hanging one is abandoned at
 * --reconnect-timeout, holds up no delivery meanwhile and is cut at shutdown; with the flag off nothing
 * runs.
 *
 * The member pods get the real delivery: the running admission service's pod webhook injects the
 * kd-guestconfig native sidecar, which writes the file and the generator file the hook reads.
 */
import { describe, expect, it } from '@jest/globals';
import {
  ANNOTATION_CONFIGMETA_GENERATOR as ANNOTATION_GENERATOR,
  GENERATOR_FILE,
  GUESTCONFIG_DIR,
  GUESTCONFIG_SIDECAR,
  LABEL_KDCLUSTER,
  LABEL_ROLE,
} from '@kd-connections/shared/domain';
import { CONDITION_MEMBERS_RECONNECTED } from '@kd-connections/shared/plan';
import { TEST_NODE_TOLERATION } from '../controlplane/node.js';
import { BUSYBOX_IMAGE } from '../images/base-images.js';
import { useTestEnv } from '../support/cluster.js';
import { apply, configMap, getJson, kdApp, kdCluster, kubectlOk } from '../support/kd-objects.js';
import { eventually, sleep } from '../support/processes.js';
import { useDeliveryServices, waitPodReady } from './node-support.js';

const env = useTestEnv();
const TIMEOUT_MS = 3000;
const LOG = '/tmp/reconnect.log';
const ATTEMPTS = '/tmp/attempts.log';
const GEN_FILE = `${GUESTCONFIG_DIR}/${GENERATOR_FILE}`;
// The first delivery waits for both seats (the harness's default is not to wait): a member delivered alone
// would rightly hear of the other with --addnodes (member-notifications.test.ts), which is not this file's subject.
const HOOK_FLAGS = ['--reconnect-hook', `--reconnect-timeout=${TIMEOUT_MS / 1000}s`, '--first-delivery-wait=2m'];

type Obj = Record<string, any>;

/**
 * A member pod as an app would declare it: only the `app` container, whose config package startscript
 * sits where KubeDirector puts it (the pod webhook adds the delivery). The startscript logs every
 * attempt, fails while /tmp/fail exists, hangs while /tmp/hang exists, and otherwise appends
 * "<arg> <generator in the file>" to LOG.
 */
function reconnectMemberPod(name: string, cluster: string, role: string): Obj {
  const startscript = [
    '#!/bin/sh',
    `echo "attempt $1 $(cat ${GEN_FILE})" >> ${ATTEMPTS}`,
    'if [ -e /tmp/fail ]; then echo "boom: cannot reconnect" >&2; exit 3; fi',
    'if [ -e /tmp/hang ]; then sleep 3600; fi',
    `echo "$1 $(cat ${GEN_FILE})" >> ${LOG}`,
  ].join('\n');
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { [LABEL_KDCLUSTER]: cluster, [LABEL_ROLE]: role } },
    spec: {
      hostNetwork: true,
      tolerations: [TEST_NODE_TOLERATION],
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'app',
          image: BUSYBOX_IMAGE,
          imagePullPolicy: 'Never',
          command: [
            'sh',
            '-c',
            `mkdir -p /opt/guestconfig/appconfig && cat > /opt/guestconfig/appconfig/startscript <<'EOF'\n${startscript}\nEOF\n` +
              'chmod +x /opt/guestconfig/appconfig/startscript && exec sleep 3600',
          ],
          // Not Ready while /tmp/notready exists (an app waiting for a connection to change).
          readinessProbe: {
            exec: {
              command: ['sh', '-c', 'test ! -e /tmp/notready && test -x /opt/guestconfig/appconfig/startscript'],
            },
            periodSeconds: 1,
          },
        },
      ],
    },
  };
}

/**
 * Roles: controller has a config package, worker none. (The unit tests cover the app-wide default and an
 * explicit null; `kubectl apply` would drop a null.)
 */
function hookedApp(name: string): Obj {
  const app = kdApp(name) as Obj;
  app.spec.roles[0].configPackage = { packageURL: 'file:///opt/configs/appconfig.tgz' };
  return app;
}

const inPod = (pod: string, container: string, script: string) =>
  env.kubectl(['exec', pod, '-c', container, '--', 'sh', '-c', script]);
const logLines = async (pod: string, file = LOG) =>
  (await inPod(pod, 'app', `cat ${file} 2>/dev/null || true`)).stdout.split('\n').filter(Boolean);
const cluster = () => getJson(env, ['kubedirectorcluster', 'hooked']);
const generatorOf = async () => ((await cluster()).spec.configMetaGenerator ?? 0) as number;
const reconnectState = async (pod: string) => (await cluster()).status?.memberReconnects?.[pod];
const condition = async () =>
  ((await cluster()).status?.conditions ?? []).find((c: Obj) => c.type === CONDITION_MEMBERS_RECONNECTED);

/** Edits the connected ConfigMap and returns the generator the edit leads to. */
async function change(value: string, before: number): Promise<number> {
  await kubectlOk(env, ['patch', 'configmap', 'hook-cm', '--type=merge', '-p', JSON.stringify({ data: { v: value } })]);
  return eventually('the generator moves on', async () => {
    const g = await generatorOf();
    return g > before ? g : undefined;
  });
}

const CONTROLLER = 'hooked-controller-0';
const WORKER = 'hooked-worker-0';

const services = useDeliveryServices(
  env,
  async () => {
    await apply(env, [
      hookedApp('hooked'),
      configMap('hook-cm', { v: '0' }),
      kdCluster('hooked', 'hooked', { configmaps: ['hook-cm'] }, ['controller', 'worker']),
    ]);
    await apply(env, [
      reconnectMemberPod(CONTROLLER, 'hooked', 'controller'),
      reconnectMemberPod(WORKER, 'hooked', 'worker'),
    ]);
    await waitPodReady(env, CONTROLLER);
    await waitPodReady(env, WORKER);
  },
  { reconcilerArgs: HOOK_FLAGS },
);

describe('the reconnect hook (startscript --reconnect) in running member pods', () => {
  let generator = 0;

  it('the member pods carry the real delivery: the webhook injected the kd-guestconfig native sidecar', async () => {
    for (const name of [CONTROLLER, WORKER]) {
      const p = await getJson(env, ['pod', name]);
      const sidecar = (p.spec.initContainers ?? []).find((c: Obj) => c.name === GUESTCONFIG_SIDECAR);
      expect(sidecar?.restartPolicy).toBe('Always');
      expect(p.spec.containers.find((c: Obj) => c.name === 'app').volumeMounts.map((m: Obj) => m.mountPath)).toContain(
        GUESTCONFIG_DIR,
      );
      // The app sees the generator file the sidecar writes (the startscript reads it there).
      await eventually(`${name}: the app reads the annotated generator in ${GEN_FILE}`, async () => {
        const annotated = (await getJson(env, ['pod', name])).metadata.annotations?.[ANNOTATION_GENERATOR];
        return annotated !== undefined && (await inPod(name, 'app', `cat ${GEN_FILE}`)).stdout === annotated;
      });
    }
  });

  it('not on the first delivery: the member gets a baseline, no hook runs; the worker role has no package', async () => {
    const base = await eventually(
      'a baseline for the controller',
      async () => (await reconnectState(CONTROLLER))?.generator,
    );
    expect(base).toBe(await generatorOf());
    generator = base;
    expect(await reconnectState(WORKER)).toBeUndefined();
    await eventually(
      'the file holds it',
      async () => (await inPod(CONTROLLER, GUESTCONFIG_SIDECAR, `cat ${GEN_FILE}`)).stdout === String(base),
    );
    await sleep(2000);
    expect(await logLines(CONTROLLER, ATTEMPTS)).toEqual([]);
  });

  it('runs exactly once for each new generator, in the app container, and records it', async () => {
    for (const value of ['1', '2']) {
      generator = await change(value, generator);
      const lines = await eventually(
        `--reconnect ${generator} logged`,
        async () => {
          const l = await logLines(CONTROLLER);
          return l.includes(`--reconnect ${generator}`) ? l : undefined;
        },
        60_000,
        250,
      );
      await eventually('recorded in status', async () => (await reconnectState(CONTROLLER))?.generator === generator);
      // Nothing more for the same generator.
      await sleep(2500);
      const after = await logLines(CONTROLLER);
      expect(after).toEqual(lines);
      expect(after.filter((l) => l === `--reconnect ${generator}`)).toHaveLength(1);
    }
    expect(await logLines(WORKER, ATTEMPTS)).toEqual([]);
    expect((await condition())?.status).toBe('True');
    expect(await services.reconciler.metric('kd_reconciler_reconnect_hooks_total', { result: 'ok' })).toBe(2);
    // Every read of the generator file (exec `cat` in the kd-guestconfig sidecar) answered.
    expect(services.reconciler.output()).not.toContain('cannot read the member generator file');
  }, 180_000);

  it('runs in a member that is Running but not Ready: it may be waiting for exactly this change', async () => {
    await inPod(CONTROLLER, 'app', 'touch /tmp/notready');
    await eventually('the controller is not Ready', async () => {
      const p = await getJson(env, ['pod', CONTROLLER]);
      return p.status.conditions.find((c: Obj) => c.type === 'Ready')?.status === 'False';
    });
    generator = await change('nr', generator);
    await eventually(
      `--reconnect ${generator} logged while not Ready`,
      async () => (await logLines(CONTROLLER)).includes(`--reconnect ${generator}`),
      60_000,
      250,
    );
    const p = await getJson(env, ['pod', CONTROLLER]);
    expect(p.status.conditions.find((c: Obj) => c.type === 'Ready')?.status).toBe('False');
    await inPod(CONTROLLER, 'app', 'rm -f /tmp/notready');
    await waitPodReady(env, CONTROLLER);
  }, 120_000);

  it('a failing hook: event naming the pod, a condition, retried with backoff until it succeeds', async () => {
    await inPod(CONTROLLER, 'app', 'touch /tmp/fail');
    generator = await change('3', generator);
    const cond = await eventually(
      'the condition names the pod',
      async () => {
        const c = await condition();
        return c?.status === 'False' && c.message.includes(CONTROLLER) ? c : undefined;
      },
      60_000,
      250,
    );
    expect(cond.reason).toBe('ReconnectFailed');
    expect(cond.message).toContain(`generator ${generator}: exit code 3`);
    const event = await eventually('a ReconnectFailed event regarding the pod', async () => {
      const list = await getJson(env, ['events.events.k8s.io']);
      return list.items.find((e: Obj) => e.reason === 'ReconnectFailed' && e.regarding?.name === CONTROLLER);
    });
    expect(event.type).toBe('Warning');
    expect(event.note).toContain('exit code 3');
    expect(event.note).toContain('boom: cannot reconnect');
    expect(event.related?.name).toBe('hooked');
    // Retried (backoff 1s, 2s, ...): more attempts, still no success logged.
    await eventually(
      'a retry',
      async () =>
        (await logLines(CONTROLLER, ATTEMPTS)).filter((l) => l === `attempt --reconnect ${generator}`).length >= 2,
      30_000,
      250,
    );
    expect(await logLines(CONTROLLER)).not.toContain(`--reconnect ${generator}`);
    expect((await reconnectState(CONTROLLER))?.failures).toBeGreaterThanOrEqual(2);

    await inPod(CONTROLLER, 'app', 'rm /tmp/fail');
    await eventually(
      'the retry succeeds',
      async () => (await logLines(CONTROLLER)).includes(`--reconnect ${generator}`),
      60_000,
      250,
    );
    await eventually('success clears the condition', async () => (await condition())?.status === 'True');
    // (rosterSeq: how far it heard of membership changes; member-notifications.test.ts is about those.)
    expect(await reconnectState(CONTROLLER)).toEqual({
      uid: expect.any(String),
      generator,
      rosterSeq: expect.any(Number),
    });
  }, 180_000);

  it('a hanging hook is abandoned at --reconnect-timeout and counts as failed', async () => {
    await inPod(CONTROLLER, 'app', 'touch /tmp/hang');
    generator = await change('4', generator);
    const started = await eventually(
      'the hook started',
      async () =>
        (await logLines(CONTROLLER, ATTEMPTS)).includes(`attempt --reconnect ${generator}`) ? Date.now() : undefined,
      60_000,
      100,
    );
    const cond = await eventually(
      'abandoned',
      async () => {
        const c = await condition();
        return c?.status === 'False' && c.message.includes('abandoned') ? c : undefined;
      },
      30_000,
      100,
    );
    const took = Date.now() - started;
    expect(cond.message).toContain(
      `${CONTROLLER} (generator ${generator}: no answer within ${TIMEOUT_MS} ms: abandoned`,
    );
    expect(took).toBeGreaterThanOrEqual(TIMEOUT_MS - 500);
    expect(took).toBeLessThan(TIMEOUT_MS + 10_000);
    expect(
      await services.reconciler.metric('kd_reconciler_reconnect_hooks_total', { result: 'timeout' }),
    ).toBeGreaterThanOrEqual(1);

    await inPod(CONTROLLER, 'app', 'rm /tmp/hang');
    await eventually(
      'the retry succeeds',
      async () => (await logLines(CONTROLLER)).includes(`--reconnect ${generator}`),
      60_000,
      250,
    );
    await eventually('the condition clears', async () => (await condition())?.status === 'True');
  }, 180_000);

  it('a hanging hook holds up neither delivery (one delivery worker) nor the reconciler’s shutdown', async () => {
    // One delivery worker and a timeout far past the test's waits: were hooks run in the delivery workers
    // (as before), the hanging hook would hold the only one, and no edit would be delivered for a minute.
    const rec = await services.restartReconciler(['--reconnect-hook', '--reconnect-timeout=90s', '--concurrency=1']);
    await inPod(CONTROLLER, 'app', 'touch /tmp/hang');
    generator = await change('6', generator);
    await eventually(
      'the hook started (and hangs)',
      async () => (await logLines(CONTROLLER, ATTEMPTS)).includes(`attempt --reconnect ${generator}`),
      60_000,
      100,
    );
    generator = await change('7', generator);
    await eventually(
      'the next generator reaches the file while the hook hangs',
      async () => (await inPod(CONTROLLER, GUESTCONFIG_SIDECAR, `cat ${GEN_FILE}`)).stdout === String(generator),
      30_000,
      250,
    );
    expect(await rec.metric('kd_reconciler_reconnect_hooks_total', { result: 'timeout' })).toBe(0);
    // SIGTERM while it still hangs: the hook is cut, not waited for (the chart's grace period is 30 s).
    const t0 = Date.now();
    const code = await rec.stop('SIGTERM', 60_000);
    const took = Date.now() - t0;
    expect(code).toBe(0);
    console.log(`reconciler stopped ${took} ms after SIGTERM with a hook hanging`);
    expect(took).toBeLessThan(15_000);
    expect(rec.output()).toContain('reconnect pass cut short');
    // The cut hook was never recorded: the next leader runs it (at least once).
    await inPod(CONTROLLER, 'app', 'rm -f /tmp/hang');
    await services.restartReconciler(HOOK_FLAGS);
    await eventually(
      'the next reconciler runs the hook for the generator the file holds',
      async () => (await logLines(CONTROLLER)).includes(`--reconnect ${generator}`),
      60_000,
      250,
    );
    await eventually('recorded', async () => (await reconnectState(CONTROLLER))?.generator === generator);
  }, 240_000);

  it('with the flag off nothing is exec’d: a new generator reaches the file, no hook runs', async () => {
    const rec = await services.restartReconciler();
    const attemptsBefore = await logLines(CONTROLLER, ATTEMPTS);
    const recorded = generator;
    generator = await change('5', generator);
    await eventually(
      'the file holds the new generator',
      async () => (await inPod(CONTROLLER, GUESTCONFIG_SIDECAR, `cat ${GEN_FILE}`)).stdout === String(generator),
      60_000,
      250,
    );
    await sleep(3000);
    expect(await logLines(CONTROLLER, ATTEMPTS)).toEqual(attemptsBefore);
    expect((await reconnectState(CONTROLLER))?.generator).toBe(recorded);
    expect(await rec.metric('kd_reconciler_reconnect_hooks_total')).toBe(0);
  }, 120_000);
});
