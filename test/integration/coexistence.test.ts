/**
 * Running next to KubeDirector, on a control plane of this file's own with CRDs shaped like
 * KubeDirector's (test/support/kubedirector-crds.ts):
 * - the default mode's guard: both services refuse to act, with a log line and a Warning event that say
 *   what to set, and admission denies kdcluster writes with that sentence;
 * - kubedirector mode (the chart's own ValidatingWebhookConfiguration, rendered with
 *   kubedirector.enabled=true): connections denied and admitted with the default mode's messages;
 * - a writer that updates the way KubeDirector does (typed full-object update of spec+metadata,
 *   whole-status replace) always succeeds and never loses a KubeDirector field, with admission up and
 *   with it stopped;
 * - an idle minute with both sides running causes no write (audit log).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { writes } from '../support/audit.js';
import { chartValidatingConfiguration as chartConfiguration } from '../support/chart-webhooks.js';
import { useDedicatedControlPlane } from '../support/dedicated-controlplane.js';
import { kdApp, kdCluster, configMap } from '../support/kd-objects.js';

type Obj = Record<string, unknown>;
import { installKubeDirectorCrds } from '../support/kubedirector-crds.js';
import { ok, sleep } from '../support/processes.js';
import { startAdmission, startReconciler, type RunningAdmission } from '../support/services.js';

const env = useDedicatedControlPlane({}, 'coexistence');
const G = { group: 'kubedirector.hpe.com', version: 'v1beta1' } as const;
type Doc = Record<string, any>;

let custom: CustomObjectsApi;
const apply = async (objs: Obj[]) => {
  for (const o of objs)
    ok(await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(o) }), `apply ${String(o.kind)}`);
};
const getCluster = (name: string): Promise<Doc> =>
  custom.getNamespacedCustomObject({
    ...G,
    plural: 'kubedirectorclusters',
    namespace: env.namespace,
    name,
  }) as Promise<Doc>;
/** kubectl's answer to a write: code and the API server's message. */
const kubectlWrite = async (verb: 'create' | 'apply', o: Obj) => {
  const r = await env.kubectl([verb, '-f', '-'], { input: JSON.stringify(o) });
  return { code: r.code, stderr: r.stderr };
};

/** KubeDirector's Go types know these spec and status fields; a typed update carries only them. */
function typedSpec(spec: Doc): Doc {
  const out: Doc = { app: spec.app, roles: spec.roles };
  if (spec.appCatalog !== undefined) out.appCatalog = spec.appCatalog;
  const c = spec.connections ?? {};
  // omitempty: an empty list is not sent.
  const lists = Object.fromEntries(
    ['clusters', 'configmaps', 'secrets'].filter((l) => (c[l]?.length ?? 0) > 0).map((l) => [l, c[l]]),
  );
  if (Object.keys(lists).length > 0) out.connections = lists;
  return out;
}

/** A typed full-object update (PUT) of metadata+spec, as KubeDirector's client writes it. */
async function kdUpdate(name: string, change: (metadata: Doc) => void): Promise<Doc> {
  const live = await getCluster(name);
  const metadata: Doc = {
    name: live.metadata.name,
    namespace: live.metadata.namespace,
    resourceVersion: live.metadata.resourceVersion,
    uid: live.metadata.uid,
    labels: live.metadata.labels,
    annotations: live.metadata.annotations,
    finalizers: live.metadata.finalizers,
  };
  change(metadata);
  return (await custom.replaceNamespacedCustomObject({
    ...G,
    plural: 'kubedirectorclusters',
    namespace: env.namespace,
    name,
    body: { apiVersion: `${G.group}/${G.version}`, kind: 'KubeDirectorCluster', metadata, spec: typedSpec(live.spec) },
  })) as Doc;
}

/** KubeDirector's whole-status replace (PUT …/status). */
async function kdStatus(name: string, status: Doc): Promise<Doc> {
  const live = await getCluster(name);
  return (await custom.replaceNamespacedCustomObjectStatus({
    ...G,
    plural: 'kubedirectorclusters',
    namespace: env.namespace,
    name,
    body: { ...live, status },
  })) as Doc;
}

const KD_STATUS = {
  state: 'configured',
  generationUID: 'g-1',
  lastConnectionHash: 'abc',
  specGenerationToProcess: 3,
  clusterService: 'kdhs-1',
  lastNodeID: 2,
  memberStateRollup: { membershipChanging: false, membersDown: false, configErrors: false },
  roles: [
    {
      id: 'controller',
      statefulSet: 'kdss-1',
      members: [{ pod: 'kdss-1-0', nodeID: 2, service: 's-0', state: 'configured' }],
    },
  ],
};

const chartValidatingConfiguration = (port: number, mode: 'kubedirector' | 'default') =>
  chartConfiguration(env.info, { port, namespace: env.namespace, mode, name: `kd-coexist-${mode}` });

async function register(config: Doc): Promise<() => Promise<void>> {
  ok(await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(config), namespace: false }), 'register');
  return async () =>
    void (await env.kubectl(['delete', 'validatingwebhookconfiguration', config.metadata.name], { namespace: false }));
}

/** Waits until a dry-run create of a cluster with a missing app is denied by the webhook. */
async function untilLive(): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const r = await env.kubectl(['create', '--dry-run=server', '-f', '-'], {
      input: JSON.stringify(kdCluster(`probe-${i}`, 'no-such-app')),
    });
    if (r.code !== 0 && r.stderr.includes('not found')) return;
    await sleep(150);
  }
  throw new Error('webhook not live');
}

beforeAll(async () => {
  custom = env.kc.makeApiClient(CustomObjectsApi);
  await installKubeDirectorCrds(env);
}, 120_000);

describe('the default mode next to KubeDirector (the guard)', () => {
  let admission: RunningAdmission | undefined;
  let unregister: (() => Promise<void>) | undefined;
  afterAll(async () => {
    await unregister?.();
    await admission?.stop();
  });

  it('admission refuses to act: a log line and a Warning event say what to set, and writes are denied with it', async () => {
    admission = await startAdmission(env, [`--system-namespace=${env.namespace}`]);
    const line = admission.logs().find((l) => l.reason === 'KubeDirectorFound');
    expect(line?.msg).toMatch(/kd-connections admission is not acting: KubeDirector's operator is installed/);
    expect(line?.msg).toContain('set kubedirector.enabled=true');
    expect(line?.msg).toContain(
      "the kubedirectorclusters CRD is not kd-connections' (its schema has no spec.configMetaGenerator and status.lastConfigMetaGenerator",
    );
    unregister = await register(await chartValidatingConfiguration(admission.port, 'default'));
    await apply([kdApp('app-a')]).catch(() => undefined); // denied too: the kdapp webhook refuses as well
    let denied = { code: 0, stderr: '' };
    for (let i = 0; i < 100 && denied.code === 0; i++) {
      denied = await kubectlWrite('create', { ...kdCluster('guarded', 'app-a'), metadata: { name: `guarded-${i}` } });
      if (denied.code === 0) await sleep(150);
    }
    expect(denied.stderr).toContain('set kubedirector.enabled=true');
    const events = await env.kubectl(['get', 'events.events.k8s.io', '-n', 'default', '-o', 'json'], {
      namespace: false,
    });
    const found = (JSON.parse(events.stdout).items as Doc[]).filter((e) => e.reason === 'KubeDirectorFound');
    expect(found.map((e) => e.reportingController)).toContain('kd-connections-admission');
    expect(found[0]!.note).toContain('kubedirector.enabled=true');
  }, 120_000);

  it('the reconciler refuses to act: it logs what to set and never watches, leads or writes', async () => {
    const since = new Date();
    const reconciler = await startReconciler(env);
    try {
      const line = await reconciler.waitForLog((l) => l.reason === 'KubeDirectorFound', 30_000);
      expect(line.msg).toContain('kd-connections reconciler is not acting');
      expect(line.msg).toContain('set kubedirector.enabled=true');
      let noted: Doc[] = [];
      for (let i = 0; i < 50 && noted.length === 0; i++) {
        const events = await env.kubectl(['get', 'events.events.k8s.io', '-n', 'default', '-o', 'json'], {
          namespace: false,
        });
        noted = (JSON.parse(events.stdout).items as Doc[]).filter(
          (e) => e.reason === 'KubeDirectorFound' && e.reportingController === 'kd-connections-reconciler',
        );
        if (noted.length === 0) await sleep(200);
      }
      expect(noted).toHaveLength(1);
      expect(noted[0]!.type).toBe('Warning');
      expect(noted[0]!.note).toContain('kd-connections reconciler is not acting');
      await sleep(3_000);
      expect(reconciler.logs().some((l) => /leading|lease acquired|caches synced/i.test(String(l.msg)))).toBe(false);
      const ours = writes(env.cp.info().auditLogPath, {
        namespace: env.namespace,
        userAgent: 'kd-connections-reconciler',
        since,
      });
      expect(ours).toEqual([]);
    } finally {
      await reconciler.stop();
    }
  }, 90_000);
});

describe('kubedirector mode', () => {
  let admission: RunningAdmission | undefined;
  let unregister: (() => Promise<void>) | undefined;
  const startKd = async () => {
    // Same port each time: the registered configuration keeps pointing at it.
    if (admission && !admission.exited) await admission.stop();
    admission = await startAdmission(env, [`--system-namespace=${env.namespace}`, '--kubedirector-mode=true'], {
      port: admission?.port,
    });
  };
  afterAll(async () => {
    await unregister?.();
    await admission?.stop();
  });

  it('enforces connectable_to and the other checks on KubeDirector-shaped objects, with the default mode messages', async () => {
    await startKd();
    expect(admission!.logs().some((l) => l.reason === 'KubeDirectorFound')).toBe(false);
    expect((await admission!.waitForLog((l) => l.msg === 'listening')).mode).toBe('kubedirector');
    unregister = await register(await chartValidatingConfiguration(admission!.port, 'kubedirector'));
    await untilLive();
    await apply([
      kdApp('notebook', { category: 'notebook', connectable_to: [{ category: 'spark' }] }),
      kdApp('spark', { category: 'spark' }),
      kdApp('db', { category: 'database' }),
      kdCluster('spark-a', 'spark'),
      kdCluster('db-a', 'db'),
      configMap('model-a', { k: 'v' }),
    ]);
    // category and connectable_to survive KubeDirector's kdapp schema (it preserves unknown spec fields).
    const app = await env.kubectl(['get', 'kdapp', 'notebook', '-o', 'jsonpath={.spec.connectable_to[0].category}']);
    expect(app.stdout).toBe('spark');

    // Five problems in one manifest, all named in one answer (KubeDirector's schema has no list-type set
    // or CEL rule, so the webhook sees everything).
    const bad = kdCluster('nb', 'notebook', {
      clusters: ['db-a', 'nb', 'spark-a', 'spark-a', 'ghost'],
      configmaps: ['no-such-cm'],
    });
    const denied = await kubectlWrite('create', bad);
    expect(denied.code).not.toBe(0);
    const ns = env.namespace;
    expect(denied.stderr).toContain(`KubeDirectorCluster ${ns}/nb is not valid (5 problems):`);
    for (const line of [
      `- spec.connections.clusters[0]: cluster "db-a" uses app "db"`,
      `- spec.connections.clusters[1]: a cluster cannot connect to itself ("nb")`,
      `- spec.connections.clusters[3]: duplicate entry "spark-a" (also at index 2)`,
      `- spec.connections.clusters[4]: cluster "ghost" not found in namespace "${ns}"`,
      `- spec.connections.configmaps[0]: configmap "no-such-cm" not found in namespace "${ns}"`,
    ])
      expect(denied.stderr).toContain(line);

    // Allowed: a cluster connection connectable_to permits, and a ConfigMap.
    const good = kdCluster('nb', 'notebook', { clusters: ['spark-a'], configmaps: ['model-a'] });
    // The warning is the default mode's too (KubeDirector's member pods carry the same label).
    expect(await kubectlWrite('create', good)).toEqual({
      code: 0,
      stderr:
        'Warning: spec.connections.clusters[0]: cluster "spark-a" has no ready members yet; its section of configmeta fills in as they come up\n',
    });
    // Nothing was added to the object: no generator (KubeDirector's schema would prune it anyway).
    expect((await getCluster('nb')).spec.configMetaGenerator).toBeUndefined();
    // Adding a forbidden connection later is refused with the same sentence.
    const add = await kubectlWrite(
      'apply',
      kdCluster('nb', 'notebook', { clusters: ['spark-a', 'db-a'], configmaps: ['model-a'] }),
    );
    expect(add.stderr).toContain('- spec.connections.clusters[1]: cluster "db-a" uses app "db"');
  }, 120_000);

  it('KubeDirector-style writes succeed and keep every KubeDirector field, with admission up and down', async () => {
    const keeps = (o: Doc) => {
      expect(o.status).toEqual(KD_STATUS);
      expect(typedSpec(o.spec)).toEqual(o.spec);
    };
    for (const phase of ['up', 'down'] as const) {
      if (phase === 'down') await admission!.stop();
      // Finalizer add (typed full-object update of metadata+spec).
      keeps(await kdStatus('nb', KD_STATUS));
      let o = await kdUpdate('nb', (m) => (m.finalizers = [...(m.finalizers ?? []), 'kubedirector.hpe.com/cleanup']));
      expect(o.metadata.finalizers).toContain('kubedirector.hpe.com/cleanup');
      keeps(await getCluster('nb'));
      // Status replace, twice (state changes), then a typed update of labels with spec unchanged.
      keeps(await kdStatus('nb', { ...KD_STATUS, state: 'updating' }).then(() => kdStatus('nb', KD_STATUS)));
      o = await kdUpdate('nb', (m) => (m.labels = { ...(m.labels ?? {}), phase }));
      expect(o.metadata.labels.phase).toBe(phase);
      keeps(await getCluster('nb'));
      // Finalizer removal.
      o = await kdUpdate(
        'nb',
        (m) => (m.finalizers = (m.finalizers ?? []).filter((f: string) => f !== 'kubedirector.hpe.com/cleanup')),
      );
      expect(o.metadata.finalizers ?? []).not.toContain('kubedirector.hpe.com/cleanup');
      keeps(await getCluster('nb'));
    }
    // Down, a user's connection change is still refused (failurePolicy Fail): protection is kept.
    const change = await kubectlWrite('apply', kdCluster('nb', 'notebook', { clusters: [], configmaps: ['model-a'] }));
    expect(change.code).not.toBe(0);
    expect(change.stderr).toMatch(/failed calling webhook "validate-kdcluster\.kd-connections\.hpe\.com"/);
    // A typed update that drops the now-empty list is not a connection change: it passes while down.
    await kdUpdate('nb', (m) => (m.annotations = { ...(m.annotations ?? {}), k: 'v' }));
    // Deletion with a finalizer finishes while admission is down.
    await kdUpdate('nb', (m) => (m.finalizers = ['kubedirector.hpe.com/cleanup']));
    ok(await env.kubectl(['delete', 'kdcluster', 'nb', '--wait=false']), 'delete');
    await kdUpdate('nb', (m) => (m.finalizers = []));
    for (let i = 0; i < 50; i++) {
      const r = await env.kubectl(['get', 'kdcluster', 'nb']);
      if (r.code !== 0) break;
      await sleep(100);
    }
    expect((await env.kubectl(['get', 'kdcluster', 'nb'])).code).not.toBe(0);
  }, 120_000);

  it('an idle minute with both sides running causes no write', async () => {
    await startKd();
    await apply([kdCluster('idle', 'notebook', { clusters: ['spark-a'] })]);
    await kdStatus('idle', KD_STATUS);
    await sleep(2_000);
    const since = new Date();
    // KubeDirector's side: it re-reads its objects and writes only on change; so does this writer.
    const kdSide = setInterval(() => void getCluster('idle').catch(() => undefined), 5_000);
    await sleep(60_000);
    clearInterval(kdSide);
    const all = writes(env.cp.info().auditLogPath, { namespace: env.namespace, since });
    expect(all.map((e) => `${e.verb} ${e.requestURI} ${e.userAgent ?? ''}`)).toEqual([]);
    expect(admission!.exited).toBe(false);
  }, 120_000);
});
