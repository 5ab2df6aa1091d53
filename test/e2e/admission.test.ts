/**
 * End to end on the real control plane: the built admission service registered in `url` mode, driven
 * with kubectl exactly as a user (or a GitOps tool) would.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { CoreV1Api } from '@kubernetes/client-node';
import { useTestEnv } from '../support/cluster.js';
import { createNamespace } from '../support/namespaces.js';
import { installCrds } from '../support/crds.js';
import { eventually, ok, repoPath } from '../support/processes.js';
import {
  registerWebhooks,
  type Registration,
  waitUntilLive,
  WEBHOOK_NAMES,
} from '../support/webhook-configurations.js';
import { reviewLogBarrier } from '../support/review-log-barrier.js';
import { type RunningAdmission, startAdmission } from '../support/services.js';

const env = useTestEnv();
const catalog = `${env.namespace}-catalog`;
let svc: RunningAdmission;
let hooks: Registration | undefined;
const startedAt = new Date();

beforeAll(async () => {
  await installCrds(env);
  await createNamespace(env.kc, catalog);
  svc = await startAdmission(env, [`--system-namespace=${catalog}`]);
  hooks = await registerWebhooks(env, svc);
  await waitUntilLive(env);
  // The examples, in their documented order (a connection is admitted only when its target exists).
  for (const f of ['10-apps.yaml', '20-configmaps.yaml', '30-secrets.yaml', '40-clusters.yaml']) {
    ok(await env.kubectl(['apply', '-f', repoPath(`examples/${f}`)]), `apply examples/${f}`);
  }
}, 120_000);

afterAll(async () => {
  await hooks?.remove();
  await svc?.stop();
  await env.kc
    .makeApiClient(CoreV1Api)
    .deleteNamespace({ name: catalog })
    .catch(() => undefined);
});

const ns = () => env.namespace;
const apply = (yaml: string, ...args: string[]) => env.kubectl(['apply', '-f', '-', ...args], { input: yaml });

async function getCluster(name: string): Promise<{
  metadata: { resourceVersion: string };
  spec: { configMetaGenerator?: number; connections?: Record<string, string[]> };
}> {
  return JSON.parse(ok(await env.kubectl(['get', 'kdcluster', name, '-o', 'json']), `get ${name}`).stdout);
}

const generator = async (name: string) => (await getCluster(name)).spec.configMetaGenerator;

function clusterYaml(name: string, spec: string): string {
  return `apiVersion: kubedirector.hpe.com/v1beta1
kind: KubeDirectorCluster
metadata:
  name: ${name}
spec:
  app: jupyter-notebook
  roles:
    - id: controller
      members: 1
${spec}`;
}

/** What kubectl prints after "denied the request: " (the webhook's own message). */
function denial(stderr: string, webhook = WEBHOOK_NAMES.validateCluster): string {
  const marker = `admission webhook "${webhook}" denied the request: `;
  const at = stderr.indexOf(marker);
  if (at < 0) throw new Error(`no denial by ${webhook} in:\n${stderr}`);
  return stderr.slice(at + marker.length).trimEnd();
}

const PG_NOT_ALLOWED =
  'cluster "pg-main" uses app "postgres" (category "database", distroID "bitnami/postgresql", version "12.4.0"): ' +
  'connectable_to of app "jupyter-notebook" does not allow it; allowed: {category: "training"}, {category: "streaming", version: ">=2.4 <3"}';

describe('kubectl apply is judged by the validating webhook', () => {
  const deniedExample = repoPath('examples/denied/notebook-to-postgres.yaml');

  it('refuses a connection connectable_to forbids, naming the cluster, its app, category and the allowed entries', async () => {
    const r = await env.kubectl(['apply', '-f', deniedExample]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `Error from server (Forbidden): error when creating "${deniedExample}": admission webhook "${WEBHOOK_NAMES.validateCluster}" denied the request: ` +
        `KubeDirectorCluster ${ns()}/notebook-sql is not valid (1 problem):\n- spec.connections.clusters[0]: ${PG_NOT_ALLOWED}\n`,
    );
    expect((await env.kubectl(['get', 'kdcluster', 'notebook-sql', '--ignore-not-found', '-o', 'name'])).stdout).toBe(
      '',
    );
  });

  it('names an unknown cluster and missing or unlabeled ConfigMaps/Secrets with field paths, all in one message', async () => {
    // Unlabeled objects exist but are never in the label-selected caches: only the live read finds them,
    // which is why the message says "lacks label" rather than "not found".
    ok(await env.kubectl(['create', 'configmap', 'plain-settings', '--from-literal=a=1']), 'create cm');
    ok(await env.kubectl(['create', 'secret', 'generic', 'plain-creds', '--from-literal=p=x']), 'create secret');
    const r = await apply(
      clusterYaml(
        'multi',
        `  connections:
    clusters: [ghost, pg-main]
    configmaps: [model-prediction, missing-cm, plain-settings]
    secrets: [missing-secret, plain-creds]
`,
      ),
    );
    expect(r.code).toBe(1);
    expect(denial(r.stderr).split('\n')).toEqual([
      `KubeDirectorCluster ${ns()}/multi is not valid (6 problems):`,
      `- spec.connections.clusters[0]: cluster "ghost" not found in namespace "${ns()}"`,
      `- spec.connections.clusters[1]: ${PG_NOT_ALLOWED}`,
      `- spec.connections.configmaps[1]: configmap "missing-cm" not found in namespace "${ns()}"`,
      '- spec.connections.configmaps[2]: configmap "plain-settings" lacks label kubedirector.hpe.com/cmType; add it (its value groups the ConfigMap in configmeta) to make it connectable',
      `- spec.connections.secrets[0]: secret "missing-secret" not found in namespace "${ns()}"`,
      '- spec.connections.secrets[1]: secret "plain-creds" lacks label kubedirector.hpe.com/secretType; add it (its value groups the Secret in configmeta) to make it connectable',
    ]);
  });

  it('refuses a cluster whose name could not label its member pods (longer than 63 characters)', async () => {
    const long = `nb-${'x'.repeat(61)}`;
    const r = await apply(clusterYaml(long, ''));
    expect(r.code).toBe(1);
    expect(denial(r.stderr).split('\n')).toEqual([
      `KubeDirectorCluster ${ns()}/${long} is not valid (1 problem):`,
      `- metadata.name: "${long}" has 64 characters; a KubeDirectorCluster's name must be at most 63, because its member pods carry it in the label kubedirector.hpe.com/kdcluster`,
    ]);
  });

  it('admits a connection to a ConfigMap created in the same kubectl apply', async () => {
    // The ConfigMap is created milliseconds before the cluster that connects to it: whether the watch
    // or the live read on a cache miss answers is a race, and either must find it (the miss path
    // itself is unit-tested; the "lacks label" lines above can only come from it).
    for (const i of [1, 2, 3]) {
      const r = await apply(`apiVersion: v1
kind: ConfigMap
metadata:
  name: fresh-${i}
  labels: { kubedirector.hpe.com/cmType: fresh }
data: { k: v }
---
${clusterYaml(`fresh-user-${i}`, `  connections:\n    configmaps: [fresh-${i}]\n`)}`);
      expect(r.stderr).toBe('');
      expect(r.stdout).toContain(`kubedirectorcluster.kubedirector.hpe.com/fresh-user-${i} created`);
    }
  });

  it('names duplicates and self connections in one answer with the rest, before the schema refuses them', async () => {
    // The CRD makes connection lists `x-kubernetes-list-type: set` and has a CEL rule against
    // self-connection; the API server checks those after the mutating webhooks and before the validating
    // ones. So the mutating webhook answers with every problem itself when the schema would refuse some
    // (test/e2e/one-apply.test.ts has five problems, and admission stopped).
    const before = svc.logs().length;
    const r = await apply(
      clusterYaml('selfish', '  connections:\n    clusters: [kafka-events, kafka-events, selfish]\n'),
    );
    expect(r.code).toBe(1);
    expect(denial(r.stderr, WEBHOOK_NAMES.mutateCluster)).toBe(
      `KubeDirectorCluster ${ns()}/selfish is not valid (3 problems):\n` +
        `- spec.connections.clusters[0]: cluster "kafka-events" uses app "kafka" (category "messaging", distroID "hpecp/kafka", version "5.5.1"): connectable_to of app "jupyter-notebook" does not allow it; allowed: {category: "training"}, {category: "streaming", version: ">=2.4 <3"}\n` +
        '- spec.connections.clusters[1]: duplicate entry "kafka-events" (also at index 0)\n' +
        '- spec.connections.clusters[2]: a cluster cannot connect to itself ("selfish")',
    );
    // The validating webhook was never reached (a later review's line shows every line of this one is out).
    await reviewLogBarrier(env, svc, 'barrier', clusterYaml('barrier', ''));
    const judged = svc
      .logs()
      .slice(before)
      .filter((l) => l.msg === 'review' && l.name === 'selfish');
    expect(judged.map((l) => l.webhook)).toEqual(['mutate-kdcluster']);
  });

  it('validates kdapps: a malformed connectable_to is denied with field paths', async () => {
    const r = await apply(`apiVersion: kubedirector.hpe.com/v1beta1
kind: KubeDirectorApp
metadata:
  name: broken
spec:
  label: { name: Broken }
  distroID: kd/broken
  version: '1.0'
  category: notebook
  connectable_to:
    - { version: '>>=2 <' }
    - { category: training }
`);
    expect(r.code).toBe(1);
    expect(denial(r.stderr, WEBHOOK_NAMES.validateApp)).toBe(
      `KubeDirectorApp ${ns()}/broken is not valid (1 problem):\n` +
        '- spec.connectable_to[0].version: ">>=2 <" is neither a version (e.g. "2.4.5") nor a valid semver range (e.g. ">=2.4 <3")',
    );
  });

  it('finds apps in the system catalog namespace for appCatalog: system', async () => {
    ok(
      await env.kubectl(['apply', '-f', '-'], {
        namespace: catalog,
        input: `apiVersion: kubedirector.hpe.com/v1beta1
kind: KubeDirectorApp
metadata: { name: catalog-db }
spec: { label: { name: DB }, distroID: kd/db, version: '1.0', category: database }
`,
      }),
      'catalog app',
    );
    const admitted = await apply(`apiVersion: kubedirector.hpe.com/v1beta1
kind: KubeDirectorCluster
metadata: { name: from-catalog }
spec: { app: catalog-db, appCatalog: system }
`);
    expect(admitted.stderr).toBe('');
    const missing = await apply(`apiVersion: kubedirector.hpe.com/v1beta1
kind: KubeDirectorCluster
metadata: { name: local-only }
spec: { app: postgres, appCatalog: system }
`);
    expect(denial(missing.stderr)).toBe(
      `KubeDirectorCluster ${ns()}/local-only is not valid (1 problem):\n` +
        `- spec.app: app "postgres" not found in the system catalog (namespace "${catalog}", appCatalog "system")`,
    );
  });
});

describe('spec.configMetaGenerator under kubectl and GitOps', () => {
  it('rises by exactly one when an allowed connection is added, and kubectl shows the warnings', async () => {
    const created = await apply(clusterYaml('analyst', '  connections:\n    configmaps: [model-prediction]\n'));
    expect(created.stderr).toBe('');
    expect(await generator('analyst')).toBe(1);
    const updated = await apply(
      clusterYaml('analyst', '  connections:\n    clusters: [training-cluster]\n    configmaps: [model-prediction]\n'),
    );
    expect(updated.code).toBe(0);
    expect(updated.stdout).toContain('kubedirectorcluster.kubedirector.hpe.com/analyst configured');
    expect(updated.stderr).toBe(
      'Warning: spec.connections.clusters[0]: cluster "training-cluster" has no ready members yet; its section of configmeta fills in as they come up\n',
    );
    expect(await generator('analyst')).toBe(2);
  });

  describe.each([
    ['client-side apply', 'gitops-csa', [] as string[]],
    ['server-side apply', 'gitops-ssa', ['--server-side']],
  ])('%s', (_mode, name, flags) => {
    const manifest = (clusters: string, extra = '') =>
      clusterYaml(name, `  connections:\n    clusters: [${clusters}]\n    configmaps: [model-prediction]\n${extra}`);
    const original = manifest('training-cluster, spark-logs-nightly');

    it('creates with generator 1; re-applying the same manifest changes nothing and kubectl diff exits 0', async () => {
      ok(await apply(original, ...flags), 'create');
      const first = await getCluster(name);
      expect(first.spec.configMetaGenerator).toBe(1);
      ok(await apply(original, ...flags), 're-apply');
      const second = await getCluster(name);
      expect(second.spec.configMetaGenerator).toBe(1);
      // Not even a write: the mutating webhook restored exactly what was stored.
      expect(second.metadata.resourceVersion).toBe(first.metadata.resourceVersion);
      const diff = await env.kubectl(['diff', '-f', '-', ...flags], { input: original });
      expect(diff).toEqual({ code: 0, stdout: '', stderr: '' });
    });

    it('does not bump when the connection list is reordered', async () => {
      const reordered = manifest('spark-logs-nightly, training-cluster');
      ok(await apply(reordered, ...flags), 'apply reordered');
      expect(await generator(name)).toBe(1);
      expect((await env.kubectl(['diff', '-f', '-', ...flags], { input: reordered })).code).toBe(0);
    });

    it('keeps the stored value when the generator is removed from the manifest, and refuses lowering it', async () => {
      // A client may raise it (a forced refresh)...
      ok(
        await apply(manifest('training-cluster, spark-logs-nightly', '  configMetaGenerator: 7\n'), ...flags),
        'raise',
      );
      expect(await generator(name)).toBe(7);
      // ...then drop it from the manifest: the mutating webhook puts the stored value back.
      ok(await apply(original, ...flags), 'drop');
      expect(await generator(name)).toBe(7);
      expect((await env.kubectl(['diff', '-f', '-', ...flags], { input: original })).code).toBe(0);
      // Lowering is refused. The CRD's CEL transition rule catches it during schema validation, before
      // the validating webhook (whose own check the unit tests cover) is called.
      const lower = await apply(
        manifest('training-cluster, spark-logs-nightly', '  configMetaGenerator: 3\n'),
        ...flags,
      );
      expect(lower.code).toBe(1);
      expect(lower.stderr).toBe(
        `The KubeDirectorCluster "${name}" is invalid: spec.configMetaGenerator: Invalid value: 3: may not be lowered; it counts configmeta regenerations and only goes up\n`,
      );
      expect(await generator(name)).toBe(7);
    });
  });
});

describe('--dry-run=server', () => {
  it('gives the same denial as a real request', async () => {
    const file = repoPath('examples/denied/notebook-to-postgres.yaml');
    const real = await env.kubectl(['apply', '-f', file]);
    const dry = await env.kubectl(['apply', '--dry-run=server', '-f', file]);
    expect(dry.code).toBe(1);
    expect(denial(dry.stderr)).toBe(denial(real.stderr));
    expect(denial(dry.stderr)).toContain(PG_NOT_ALLOWED);
  });

  it('predicts the bump of an allowed change without storing anything', async () => {
    const before = await getCluster('analyst');
    const logsBefore = svc.logs().length;
    const r = await apply(
      clusterYaml(
        'analyst',
        '  connections:\n    clusters: [training-cluster]\n    configmaps: [model-prediction]\n    secrets: [scm-creds]\n',
      ),
      '--dry-run=server',
      '-o',
      'json',
    );
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).spec.configMetaGenerator).toBe(before.spec.configMetaGenerator! + 1);
    const after = await getCluster('analyst');
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(after.spec).toEqual(before.spec);
    // Both webhooks saw the dry run and said so in their logs.
    // Log lines leave asynchronously, possibly after the API server has the answers.
    const seen = await eventually('both reviews logged', () => {
      const lines = svc
        .logs()
        .slice(logsBefore)
        .filter((l) => l.msg === 'review' && l.name === 'analyst');
      return lines.length >= 2 && lines;
    });
    expect(seen.map((l) => [l.webhook, l.dryRun, l.decision]).sort()).toEqual([
      ['mutate-kdcluster', true, 'patched'],
      ['validate-kdcluster', true, 'allowed'],
    ]);
  });

  it('the service never writes to the API server (audit log)', async () => {
    // A write made here with the service's user-agent prefix proves the audit log would show one.
    const probe = await auditProbe();
    expect(probe).toBe(201);
    const writes = readFileSync(env.info.auditLogPath, 'utf8')
      .split('\n')
      .filter((l) => l.includes('kd-connections-admission'))
      .map((l) => JSON.parse(l) as { verb: string; userAgent: string; requestReceivedTimestamp: string })
      .filter(
        (e) => e.userAgent.startsWith('kd-connections-admission') && new Date(e.requestReceivedTimestamp) >= startedAt,
      )
      .map((e) => `${e.verb} ${e.userAgent}`);
    expect(writes).toEqual(['create kd-connections-admission-audit-probe']);
  });
});

/** Creates a ConfigMap with the service's user-agent prefix (the admin client certificate). */
function auditProbe(): Promise<number> {
  const body = JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'audit-probe' } });
  return new Promise((ok, fail) => {
    const req = https.request(
      `${env.info.server}/api/v1/namespaces/${ns()}/configmaps`,
      {
        method: 'POST',
        ca: env.info.caPem,
        cert: env.info.adminCertPem,
        key: env.info.adminKeyPem,
        agent: false,
        headers: { 'Content-Type': 'application/json', 'User-Agent': 'kd-connections-admission-audit-probe' },
      },
      (res) => {
        res.resume();
        res.on('end', () => ok(res.statusCode ?? 0));
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

describe('member pods', () => {
  it('get the guestconfig sidecar and the app container its mount; other pods are never sent to the webhook', async () => {
    const before = await svc.requests({ webhook: 'mutate-pod' });
    const logsBefore = svc.logs().length;
    const pods = `apiVersion: v1
kind: Pod
metadata:
  name: notebook-controller-0
  labels:
    kubedirector.hpe.com/kdcluster: notebook
    kubedirector.hpe.com/role: controller
spec:
  # No ServiceAccount token volume: the sidecar's mounts below are compared exactly.
  automountServiceAccountToken: false
  containers:
    - { name: app, image: bluedata/kd-notebook:1.3 }
    - name: sidecar
      image: busybox:1.36
      volumeMounts: [{ name: scratch, mountPath: /scratch }]
  volumes: [{ name: scratch, emptyDir: {} }]
---
apiVersion: v1
kind: Pod
metadata:
  name: web-0
  labels: { app: web }
spec:
  containers: [{ name: web, image: nginx:1.27 }]
`;
    ok(await apply(pods), 'create pods');
    const member = JSON.parse(
      ok(await env.kubectl(['get', 'pod', 'notebook-controller-0', '-o', 'json']), 'get').stdout,
    );
    expect(member.spec.volumes).toContainEqual({
      name: 'kd-configmeta',
      downwardAPI: {
        defaultMode: 0o444,
        items: [
          {
            path: 'configmeta.json',
            fieldRef: { apiVersion: 'v1', fieldPath: "metadata.annotations['kubedirector.hpe.com/configmeta']" },
          },
          {
            path: 'generator',
            fieldRef: {
              apiVersion: 'v1',
              fieldPath: "metadata.annotations['kubedirector.hpe.com/configmeta-generator']",
            },
          },
          {
            path: 'splice',
            fieldRef: {
              apiVersion: 'v1',
              fieldPath: "metadata.annotations['kd-connections.hpe.com/configmeta-splice']",
            },
          },
          {
            path: 'roster',
            fieldRef: {
              apiVersion: 'v1',
              fieldPath: "metadata.annotations['kd-connections.hpe.com/configmeta-roster']",
            },
          },
        ],
      },
    });
    // The API server accepted the native sidecar and the seed init container in front.
    expect(
      member.spec.initContainers.map((c: { name: string; restartPolicy?: string }) => [c.name, c.restartPolicy]),
    ).toEqual([
      ['kd-guestconfig', 'Always'],
      ['kd-guestconfig-seed-0', undefined],
    ]);
    const mount = { name: 'kd-guestconfig', mountPath: '/etc/guestconfig', subPath: 'guestconfig' };
    expect(member.spec.containers[0].volumeMounts).toContainEqual(mount);
    // Only the container named app receives the file, as with KubeDirector.
    expect(member.spec.containers[1].volumeMounts).toEqual([{ name: 'scratch', mountPath: '/scratch' }]);

    const other = JSON.parse(ok(await env.kubectl(['get', 'pod', 'web-0', '-o', 'json']), 'get').stdout);
    expect((other.spec.volumes ?? []).map((v: { name: string }) => v.name)).not.toContain('kd-configmeta');
    // The objectSelector keeps other pods away from the service entirely.
    expect(await svc.requests({ webhook: 'mutate-pod' })).toBe(before + 1);
    const names = await eventually('the pod review logged', () => {
      const lines = svc
        .logs()
        .slice(logsBefore)
        .filter((l) => l.webhook === 'mutate-pod');
      return lines.length >= 1 && lines.map((l) => l.name);
    });
    expect(names).toEqual(['notebook-controller-0']);
  });
});

describe('kdapp updates', () => {
  it('warn in kubectl output when tightening connectable_to forbids existing connections', async () => {
    const app = readFileSync(repoPath('examples/10-apps.yaml'), 'utf8').split('\n---\n')[0]!;
    const tightened = app.replace(
      / {2}connectable_to:\n( {4}.*\n)+? {2}config:/,
      '  connectable_to:\n    - category: training\n  config:',
    );
    expect(tightened).not.toBe(app);
    const r = await apply(tightened);
    expect(r.code).toBe(0);
    // Every cluster of this app that connects to the streaming cluster, in name order.
    const spark =
      'cluster "spark-logs-nightly" (app "spark-streaming" (category "streaming", distroID "bluedata/spark", version "2.4.7"))';
    const forbidden = ['gitops-csa', 'gitops-ssa', 'notebook'].map((c) => `${ns()}/${c} → ${spark}`);
    expect(r.stderr).toBe(
      `Warning: connectable_to of app "jupyter-notebook" now forbids 3 existing connection(s): ${forbidden.join('; ')}. ` +
        "They stay in the clusters' specs but are left out of configmeta (status NotConnectable) until allowed again\n",
    );
  });
});
