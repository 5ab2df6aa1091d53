/**
 * The CRDs on a real kube-apiserver: they install, the examples and KubeDirector-style manifests apply
 * (unmodeled fields preserved), the CEL rules refuse what needs no lookup with readable messages, and
 * kubectl shows the printer columns. No admission webhook is registered here: everything the CEL rules
 * and the structural schema allow is admitted.
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { type KDClusterStatus } from '@kd-connections/shared/domain';
import { buildStatus } from '@kd-connections/shared/plan';
import { sectionPatch } from '@kd-connections/shared/primitives';
import { isDeepStrictEqual } from 'node:util';
import { useTestEnv } from '../support/cluster.js';
import { parseTable, yamlDocs } from './kd.js';
import { CRD_NAMES, installCrds } from '../support/crds.js';
import { ok, repoPath } from '../support/processes.js';

const env = useTestEnv();
const GROUP = 'kubedirector.hpe.com';
const VERSION = 'v1beta1';

beforeAll(async () => {
  await installCrds(env);
});

/** A manifest for kubectl, in the test namespace. */
function kdcluster(name: string, spec: Record<string, unknown>): string {
  return JSON.stringify({ apiVersion: `${GROUP}/${VERSION}`, kind: 'KubeDirectorCluster', metadata: { name }, spec });
}

async function applyJson(manifest: string) {
  return env.kubectl(['apply', '-f', '-'], { input: manifest });
}

describe('the CRDs', () => {
  it('install idempotently and are served as namespaced kinds with short names', async () => {
    // beforeAll installed them; applying again changes nothing (the spec generation stays). kubectl lists
    // each object with what it did (serverside-applied), which is dropped here.
    const generations = async () => {
      const r = ok(
        await env.kubectl(
          ['get', 'crd', ...CRD_NAMES, '-o', 'jsonpath={range .items[*]}{.metadata.name}={.metadata.generation} {end}'],
          {
            namespace: false,
          },
        ),
        'get crd generations',
      );
      return r.stdout.trim();
    };
    const before = await generations();
    expect(before).toMatch(
      /^kubedirectorapps\.kubedirector\.hpe\.com=\d+ kubedirectorclusters\.kubedirector\.hpe\.com=\d+$/,
    );
    const again = await installCrds(env);
    expect(
      again.stdout
        .trim()
        .split('\n')
        .map((l) => l.replace(/ \S+$/, '')),
    ).toEqual(CRD_NAMES.map((n) => `customresourcedefinition.apiextensions.k8s.io/${n}`));
    expect(await generations()).toBe(before);

    for (const [name, kind, short] of [
      [CRD_NAMES[0]!, 'KubeDirectorApp', 'kdapp'],
      [CRD_NAMES[1]!, 'KubeDirectorCluster', 'kdcluster'],
    ] as const) {
      const crd = JSON.parse(
        ok(await env.kubectl(['get', 'crd', name, '-o', 'json'], { namespace: false }), 'get crd').stdout,
      );
      expect(crd.spec.group).toBe(GROUP);
      expect(crd.spec.scope).toBe('Namespaced');
      expect(crd.spec.names.kind).toBe(kind);
      expect(crd.spec.names.shortNames).toEqual([short]);
      expect(
        crd.spec.versions.map((v: { name: string; served: boolean; storage: boolean }) => [
          v.name,
          v.served,
          v.storage,
        ]),
      ).toEqual([[VERSION, true, true]]);
      const conds = Object.fromEntries(
        (crd.status.conditions as { type: string; status: string }[]).map((c) => [c.type, c.status]),
      );
      expect(conds).toMatchObject({ Established: 'True', NamesAccepted: 'True' });
      // Structural: the API server reports no schema problem.
      expect(conds.NonStructuralSchema).toBeUndefined();
    }

    const resources = ok(
      await env.kubectl(['api-resources', `--api-group=${GROUP}`, '--no-headers'], { namespace: false }),
      'api-resources',
    );
    const lines = resources.stdout
      .trim()
      .split('\n')
      .map((l) => l.split(/\s+/));
    expect(lines).toEqual(
      expect.arrayContaining([
        ['kubedirectorapps', 'kdapp', `${GROUP}/${VERSION}`, 'true', 'KubeDirectorApp'],
        ['kubedirectorclusters', 'kdcluster', `${GROUP}/${VERSION}`, 'true', 'KubeDirectorCluster'],
      ]),
    );
  });

  it('store the status the shared library builds without pruning any of it', async () => {
    ok(
      await applyJson(kdcluster('status-shape', { app: 'postgres', connections: { configmaps: ['cm1', 'gone'] } })),
      'create',
    );
    const status = buildStatus({
      previous: undefined,
      generation: 1,
      connections: [
        { kind: 'ConfigMap', name: 'cm1', state: 'Connected', contentHash: '0123456789abcdef' },
        { kind: 'ConfigMap', name: 'gone', state: 'Missing', message: 'configmap "gone" not found in namespace "x"' },
      ],
      hash: 'a'.repeat(64),
      members: [{ pod: 'p0', role: 'primary', id: '1', fqdn: 'p0.x', domain: 'x', ready: true, present: true }],
      delivery: { generator: 1, synced: ['p0'], failed: {} },
      now: '2024-05-01T10:00:00Z',
    });
    const stored = JSON.parse(ok(await env.kubectl(['get', 'kdcluster', 'status-shape', '-o', 'json']), 'get').stdout);
    const patch = sectionPatch(
      stored.metadata,
      'status',
      stored.status,
      status as Record<string, unknown>,
      isDeepStrictEqual,
    );
    ok(
      await env.kubectl([
        'patch',
        'kdcluster',
        'status-shape',
        '--subresource=status',
        '--type=json',
        '-p',
        JSON.stringify(patch),
      ]),
      'patch status',
    );
    const back = JSON.parse(ok(await env.kubectl(['get', 'kdcluster', 'status-shape', '-o', 'json']), 'get').stdout);
    expect(back.status as KDClusterStatus).toEqual(JSON.parse(JSON.stringify(status)));
    // The same patch again fails its resourceVersion precondition instead of overwriting.
    const stale = await env.kubectl([
      'patch',
      'kdcluster',
      'status-shape',
      '--subresource=status',
      '--type=json',
      '-p',
      JSON.stringify(patch),
    ]);
    expect(stale.code).not.toBe(0);
    // (A failed JSON Patch `test` is reported by the API server as an invalid request.)
    expect(stale.stderr).toContain('the server rejected our request due to an error in our request');
  });

  it('give kdcluster a status subresource: a write to the main resource cannot set status', async () => {
    ok(await applyJson(kdcluster('status-guard', { app: 'postgres' })), 'create');
    ok(
      await env.kubectl([
        'patch',
        'kdcluster',
        'status-guard',
        '--type=merge',
        '-p',
        '{"status":{"lastConfigMetaGenerator":9}}',
      ]),
      'patch main',
    );
    const main = JSON.parse(ok(await env.kubectl(['get', 'kdcluster', 'status-guard', '-o', 'json']), 'get').stdout);
    expect(main.status?.lastConfigMetaGenerator).toBeUndefined();
    ok(
      await env.kubectl([
        'patch',
        'kdcluster',
        'status-guard',
        '--subresource=status',
        '--type=merge',
        '-p',
        '{"status":{"lastConfigMetaGenerator":9}}',
      ]),
      'patch status',
    );
    const viaStatus = JSON.parse(
      ok(await env.kubectl(['get', 'kdcluster', 'status-guard', '-o', 'json']), 'get').stdout,
    );
    expect(viaStatus.status.lastConfigMetaGenerator).toBe(9);
  });
});

describe('examples/', () => {
  const kinds = (stdout: string) =>
    stdout
      .trim()
      .split('\n')
      .filter((l) => !l.startsWith('Warning') && l.includes('/'));

  it('apply with kubectl apply -k, and a second apply changes nothing (no GitOps drift)', async () => {
    const first = ok(await env.kubectl(['apply', '-k', repoPath('examples')]), 'apply -k examples');
    expect(kinds(first.stdout)).toEqual([
      'kubedirectorapp.kubedirector.hpe.com/jupyter-notebook created',
      'kubedirectorapp.kubedirector.hpe.com/training-engine created',
      'kubedirectorapp.kubedirector.hpe.com/spark-streaming created',
      'kubedirectorapp.kubedirector.hpe.com/kafka created',
      'kubedirectorapp.kubedirector.hpe.com/postgres created',
      'configmap/model-prediction created',
      'configmap/spark-defaults created',
      'secret/scm-creds created',
      'kubedirectorcluster.kubedirector.hpe.com/kafka-events created',
      'kubedirectorcluster.kubedirector.hpe.com/training-cluster created',
      'kubedirectorcluster.kubedirector.hpe.com/spark-logs-nightly created',
      'kubedirectorcluster.kubedirector.hpe.com/notebook created',
      'kubedirectorcluster.kubedirector.hpe.com/pg-main created',
    ]);
    const versions = async () =>
      ok(
        await env.kubectl([
          'get',
          'kdapp,kdcluster,configmap,secret',
          '-o',
          'jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.resourceVersion}{"\\n"}{end}',
        ]),
        'get versions',
      )
        .stdout.split('\n')
        // The controller-manager (when a test node runs) publishes this one into every namespace, at its own time.
        .filter((l) => !l.startsWith('ConfigMap/kube-root-ca.crt='))
        .join('\n');
    const before = await versions();
    for (const o of [
      'KubeDirectorApp/kafka=',
      'ConfigMap/spark-defaults=',
      'Secret/scm-creds=',
      'KubeDirectorCluster/notebook=',
    ])
      expect(before).toContain(o);
    const second = ok(await env.kubectl(['apply', '-k', repoPath('examples')]), 'apply -k examples again');
    const lines = kinds(second.stdout);
    expect(lines).toHaveLength(13);
    // kubectl always reports a Secret written with stringData as "configured" (stringData is write-only),
    // but the request changes nothing: no resourceVersion moves and kubectl diff sees no difference.
    for (const l of lines) expect(l).toMatch(l.startsWith('secret/') ? / (unchanged|configured)$/ : / unchanged$/);
    expect(await versions()).toBe(before);
    const diff = await env.kubectl(['diff', '-k', repoPath('examples')]);
    expect({ code: diff.code, stdout: diff.stdout }).toEqual({ code: 0, stdout: '' });

    // Stored as written: connections are kept as the sets they are.
    const nb = JSON.parse(ok(await env.kubectl(['get', 'kdcluster', 'notebook', '-o', 'json']), 'get').stdout);
    expect(nb.spec.connections).toEqual({
      clusters: ['training-cluster', 'spark-logs-nightly'],
      configmaps: ['model-prediction'],
      secrets: ['scm-creds'],
    });
    const app = JSON.parse(ok(await env.kubectl(['get', 'kdapp', 'jupyter-notebook', '-o', 'json']), 'get').stdout);
    expect(app.spec.connectable_to).toEqual([{ category: 'training' }, { category: 'streaming', version: '>=2.4 <3' }]);
    expect(app.spec.category).toBe('notebook');
  });

  it('examples/denied passes the schema: only the webhook (with a lookup) can refuse it', async () => {
    const r = ok(
      await env.kubectl(['apply', '-f', repoPath('examples/denied/notebook-to-postgres.yaml')]),
      'apply denied',
    );
    expect(r.stdout.trim()).toBe('kubedirectorcluster.kubedirector.hpe.com/notebook-sql created');
  });
});

describe('KubeDirector-style manifests with fields kd-connections does not model', () => {
  const dir = repoPath('test/fixtures/kubedirector');
  const files = ['app-spark-notebook.yaml', 'cluster-spark-notebook.yaml', 'cluster-with-connections.yaml'];

  it('apply unchanged and read back with every field preserved', async () => {
    for (const f of files) ok(await env.kubectl(['apply', '-f', `${dir}/${f}`]), `apply ${f}`);
    const api = env.kc.makeApiClient(CustomObjectsApi);
    const docs = files.flatMap((f) => yamlDocs(`${dir}/${f}`));
    expect(docs.filter((d) => d.kind !== 'ConfigMap')).toHaveLength(3);
    for (const doc of docs) {
      if (doc.kind === 'ConfigMap') continue;
      const meta = doc.metadata as { name: string; labels?: Record<string, string> };
      const plural = doc.kind === 'KubeDirectorApp' ? 'kubedirectorapps' : 'kubedirectorclusters';
      const stored = (await api.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: env.namespace,
        plural,
        name: meta.name,
      })) as {
        metadata: { labels?: Record<string, string> };
        spec: Record<string, unknown>;
      };
      // Nothing pruned, nothing defaulted: the spec reads back exactly as written.
      expect(stored.spec).toEqual(doc.spec);
      if (meta.labels) expect(stored.metadata.labels).toEqual(meta.labels);
    }

    // Spot checks of fields KubeDirector apps and clusters depend on.
    const app = (await api.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: env.namespace,
      plural: 'kubedirectorapps',
      name: 'spark-notebook-kd',
    })) as {
      spec: Record<string, unknown> & { roles: Record<string, unknown>[]; services: Record<string, unknown>[] };
    };
    expect(app.spec.logoURL).toBe('https://example.com/catalog/logos/spark.png');
    expect(app.spec.systemdRequired).toBe(true);
    expect(app.spec.roles[1]!.configPackage).toEqual({
      packageURL: 'file:///opt/configscript/worker.tgz',
      useNewSetupLayout: true,
    });
    expect(app.spec.services[3]!.exported_service).toBe('jupyterhub');
    expect((app.spec.config as { selectedRoles: string[] }).selectedRoles).toEqual([
      'controller',
      'worker',
      'jupyterhub',
    ]);
    const cluster = (await api.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: env.namespace,
      plural: 'kubedirectorclusters',
      name: 'spark-notebook-instance',
    })) as {
      spec: Record<string, unknown> & { roles: Record<string, unknown>[] };
    };
    expect(cluster.spec.serviceType).toBe('LoadBalancer');
    expect(cluster.spec.roles[0]!.storage).toEqual({ size: '40Gi', storageClassName: 'standard' });
    expect((cluster.spec.roles[0]!.resources as { limits: Record<string, string> }).limits['nvidia.com/gpu']).toBe('0');
  });

  it('a second apply and kubectl diff report no change', async () => {
    for (const f of files) {
      const r = ok(await env.kubectl(['apply', '-f', `${dir}/${f}`]), `re-apply ${f}`);
      for (const l of r.stdout.trim().split('\n')) expect(l).toMatch(/ unchanged$/);
    }
    const diff = await env.kubectl(['diff', '-f', dir]);
    expect({ code: diff.code, stdout: diff.stdout }).toEqual({ code: 0, stdout: '' });
  });
});

describe('CEL rules refuse what needs no lookup, with readable messages', () => {
  const NAME_HINT =
    "is not a valid name: use a lowercase RFC 1123 name of an object in the same namespace (letters a-z, digits, '-' and '.', starting and ending with a letter or digit)";

  it('a self-connection (on create and when added by an update)', async () => {
    const r = await applyJson(
      kdcluster('selfish', { app: 'postgres', connections: { clusters: ['other', 'selfish'] } }),
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('The KubeDirectorCluster "selfish" is invalid:');
    expect(r.stderr).toMatch(
      /spec\.connections\.clusters: Invalid value: .*a cluster cannot connect to itself \("selfish"\)/,
    );

    ok(await applyJson(kdcluster('selfish', { app: 'postgres', connections: { clusters: ['other'] } })), 'create');
    const p = await env.kubectl([
      'patch',
      'kdcluster',
      'selfish',
      '--type=json',
      '-p',
      '[{"op":"add","path":"/spec/connections/clusters/-","value":"selfish"}]',
    ]);
    expect(p.code).not.toBe(0);
    expect(p.stderr).toContain('a cluster cannot connect to itself ("selfish")');
  });

  it('a bad name, a namespace-qualified name, and a duplicate', async () => {
    const r = await applyJson(
      kdcluster('badnames', {
        app: 'postgres',
        connections: { clusters: ['Bad_Name', 'ok'], configmaps: ['other-ns/cm'], secrets: ['s', 's'] },
      }),
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`spec.connections.clusters[0]: Invalid value: "Bad_Name": "Bad_Name" ${NAME_HINT}`);
    expect(r.stderr).toContain(
      `spec.connections.configmaps[0]: Invalid value: "other-ns/cm": "other-ns/cm" ${NAME_HINT}`,
    );
    expect(r.stderr).toContain('spec.connections.secrets[1]: Duplicate value: "s"');
    const stored = await env.kubectl(['get', 'kdcluster', 'badnames', '--ignore-not-found', '-o', 'name']);
    expect(stored.stdout).toBe('');
  });

  it('names follow RFC 1123 subdomains exactly (dots allowed, no empty labels or edge dashes)', async () => {
    const good = ['model.v2', '0abc', 'a-b.c-d', 'x'.repeat(63) + '.' + 'y'.repeat(63)];
    ok(await applyJson(kdcluster('goodnames', { app: 'postgres', connections: { configmaps: good } })), 'good names');
    const bad = ['a..b', '-a', 'a-', '.a', 'a.', 'A'];
    const r = await applyJson(kdcluster('badnames2', { app: 'postgres', connections: { configmaps: bad } }));
    expect(r.code).not.toBe(0);
    for (const [i, n] of bad.entries()) {
      expect(r.stderr).toContain(`spec.connections.configmaps[${i}]: Invalid value: "${n}": "${n}" ${NAME_HINT}`);
    }
  });

  it('bounded list sizes and a non-negative generator', async () => {
    const many = Array.from({ length: 101 }, (_, i) => `cm-${i}`);
    const r = await applyJson(
      kdcluster('toomany', { app: 'postgres', connections: { configmaps: many }, configMetaGenerator: -1 }),
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/spec\.connections\.configmaps: Too many: 101: must have at most 100 items/);
    expect(r.stderr).toContain(
      'spec.configMetaGenerator: Invalid value: -1: spec.configMetaGenerator in body should be greater than or equal to 0',
    );
  });

  it('a lowered or removed generator; raising it (a forced refresh) is allowed', async () => {
    ok(await applyJson(kdcluster('gen', { app: 'postgres', configMetaGenerator: 5 })), 'create');

    const lowered = await env.kubectl([
      'patch',
      'kdcluster',
      'gen',
      '--type=merge',
      '-p',
      '{"spec":{"configMetaGenerator":3}}',
    ]);
    expect(lowered.code).not.toBe(0);
    expect(lowered.stderr.trim()).toBe(
      'The KubeDirectorCluster "gen" is invalid: spec.configMetaGenerator: Invalid value: 3: may not be lowered; it counts configmeta regenerations and only goes up',
    );

    const removed = await env.kubectl([
      'patch',
      'kdcluster',
      'gen',
      '--type=json',
      '-p',
      '[{"op":"remove","path":"/spec/configMetaGenerator"}]',
    ]);
    expect(removed.code).not.toBe(0);
    expect(removed.stderr.trim()).toBe(
      'The KubeDirectorCluster "gen" is invalid: spec.configMetaGenerator: Forbidden: may not be removed once set; leave it out of manifests and the kd-connections mutating webhook keeps the stored value',
    );

    ok(
      await env.kubectl(['patch', 'kdcluster', 'gen', '--type=merge', '-p', '{"spec":{"configMetaGenerator":6}}']),
      'raise',
    );
    ok(
      await env.kubectl([
        'patch',
        'kdcluster',
        'gen',
        '--type=merge',
        '-p',
        '{"spec":{"configMetaGenerator":6,"app":"kafka"}}',
      ]),
      'same value, other change',
    );
    const g = ok(await env.kubectl(['get', 'kdcluster', 'gen', '-o', 'jsonpath={.spec.configMetaGenerator}']), 'get');
    expect(g.stdout).toBe('6');
  });

  it('a generator set for the first time on update is allowed', async () => {
    ok(await applyJson(kdcluster('gen-late', { app: 'postgres' })), 'create');
    ok(
      await env.kubectl(['patch', 'kdcluster', 'gen-late', '--type=merge', '-p', '{"spec":{"configMetaGenerator":1}}']),
      'set',
    );
  });

  it('every violation is reported in one answer', async () => {
    const r = await applyJson(
      kdcluster('multi', { app: 'postgres', connections: { clusters: ['multi', 'X', 'a', 'a'] } }),
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('a cluster cannot connect to itself ("multi")');
    expect(r.stderr).toContain(`spec.connections.clusters[1]: Invalid value: "X": "X" ${NAME_HINT}`);
    expect(r.stderr).toContain('spec.connections.clusters[3]: Duplicate value: "a"');
  });

  it('a kdapp connectable_to entry must name at least one field', async () => {
    const r = await env.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'KubeDirectorApp',
        metadata: { name: 'empty-entry' },
        spec: { label: { name: 'x' }, category: 'notebook', connectable_to: [{ category: 'training' }, {}] },
      }),
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(
      /spec\.connectable_to\[1\]: Invalid value: .*an entry needs at least one of category, distroID, version \(an empty entry matches nothing\)/,
    );
  });
});

describe('printer columns', () => {
  it('kubectl get kdcluster shows APP, CONNECTIONS, GENERATOR, SYNCED, READY, AGE', async () => {
    ok(
      await applyJson(
        kdcluster('printed', { app: 'postgres', connections: { configmaps: ['a', 'b', 'c'] }, configMetaGenerator: 4 }),
      ),
      'create',
    );
    ok(
      await env.kubectl([
        'patch',
        'kdcluster',
        'printed',
        '--subresource=status',
        '--type=merge',
        '-p',
        JSON.stringify({ status: { connectionsSummary: '2/3', lastConfigMetaGenerator: 3, membersSummary: '1/2' } }),
      ]),
      'patch status',
    );
    const t = parseTable(ok(await env.kubectl(['get', 'kdcluster', 'printed']), 'get').stdout);
    expect(t.headers).toEqual(['NAME', 'APP', 'CONNECTIONS', 'GENERATOR', 'SYNCED', 'READY', 'AGE']);
    expect(t.rows).toHaveLength(1);
    expect(t.rows[0]).toMatchObject({
      NAME: 'printed',
      APP: 'postgres',
      CONNECTIONS: '2/3',
      GENERATOR: '4',
      SYNCED: '3',
      READY: '1/2',
    });
    expect(t.rows[0]!.AGE).toMatch(/^\d+[smhd]/);
  });

  it('kubectl get kdapp shows APP NAME, CATEGORY, DISTRO ID, VERSION, AGE', async () => {
    ok(await env.kubectl(['apply', '-f', repoPath('examples/10-apps.yaml')]), 'apply apps');
    const t = parseTable(ok(await env.kubectl(['get', 'kdapp', 'jupyter-notebook', 'postgres']), 'get').stdout);
    expect(t.headers).toEqual(['NAME', 'APP NAME', 'CATEGORY', 'DISTRO ID', 'VERSION', 'AGE']);
    expect(t.rows.map(({ AGE: _age, ...r }) => r)).toEqual([
      {
        NAME: 'jupyter-notebook',
        'APP NAME': 'Jupyter Notebook',
        CATEGORY: 'notebook',
        'DISTRO ID': 'hpecp/jupyter-notebook',
        VERSION: '1.3',
      },
      {
        NAME: 'postgres',
        'APP NAME': 'PostgreSQL',
        CATEGORY: 'database',
        'DISTRO ID': 'bitnami/postgresql',
        VERSION: '12.4.0',
      },
    ]);
  });
});
