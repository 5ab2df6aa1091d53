/**
 * The kdcluster admission rules as a table: each case is a review against a fixed world and
 * the EXACT errors ("field: message") and warnings it must produce.
 */
import { describe, expect, it } from '@jest/globals';
import { formatFieldError, denialMessage } from '../src/domain/field-errors.js';
import type { RuleOptions } from '../src/domain/lookup.js';
import type { KDCluster } from '../src/domain/types.js';
import { validateCluster, type ClusterReview } from '../src/domain/validate-kdcluster.js';
import { MemoryWorld, NS, SYSTEM_NS, app, cluster, configMap, secret } from './fixtures.js';

const NOTEBOOK_ALLOWED = '{category: "training"}, {category: "streaming", version: ">=2.4 <3"}';
const PG_APP = 'app "postgres" (category "database", distroID "bitnami/postgresql", version "12.4.0")';
const SPARK3_APP = 'app "spark3" (category "streaming", distroID "bluedata/spark", version "3.1.2")';
const NAME_RULE =
  "must be a lowercase RFC 1123 name: letters a-z, digits, '-' and '.', starting and ending with a letter or digit";
const CM_LABEL_HINT =
  'lacks label kubedirector.hpe.com/cmType; add it (its value groups the ConfigMap in configmeta) to make it connectable';
const SECRET_LABEL_HINT =
  'lacks label kubedirector.hpe.com/secretType; add it (its value groups the Secret in configmeta) to make it connectable';
const KEPT = 'kept because it was connected before this change';

function world(): MemoryWorld {
  return new MemoryWorld({
    apps: [
      app('jupyter-notebook', {
        category: 'notebook',
        distroID: 'hpecp/jupyter-notebook',
        version: '1.3',
        connectable_to: [{ category: 'training' }, { category: 'streaming', version: '>=2.4 <3' }],
      }),
      app('training-engine', {
        category: 'training',
        distroID: 'hpecp/training-engine',
        version: '1.2',
        connectable_to: [],
      }),
      app('spark-streaming', {
        category: 'streaming',
        distroID: 'bluedata/spark',
        version: '2.4.7',
        connectable_to: [{ category: 'messaging', distroID: 'hpecp/kafka' }],
      }),
      app('spark3', { category: 'streaming', distroID: 'bluedata/spark', version: '3.1.2' }),
      app('postgres', { category: 'database', distroID: 'bitnami/postgresql', version: '12.4.0' }),
      // Only in the system catalog.
      app('kafka', { category: 'messaging', distroID: 'hpecp/kafka', version: '5.5.1', connectable_to: [] }, SYSTEM_NS),
    ],
    clusters: [
      cluster('training', 'training-engine', { ready: 2 }),
      cluster('spark-nightly', 'spark-streaming', { ready: 3 }),
      cluster('spark-new', 'spark3', { ready: 1 }),
      cluster('pg-main', 'postgres', { ready: 1 }),
      cluster('kafka-events', 'kafka', { ready: 3, appCatalog: 'system' }),
      cluster('orphan', 'deleted-app', { ready: 1 }),
      // No status yet: no ready members.
      cluster('cold', 'training-engine'),
      // Same name as a cluster above, other namespace: never visible from "ml".
      cluster('elsewhere', 'postgres', { ready: 1, namespace: 'other' }),
    ],
    configMaps: [
      configMap('model-prediction', 'model', { name: 'resnet50' }),
      configMap('plain-cm', undefined, { a: '1' }),
      configMap('other-ns-cm', 'model', { a: '1' }, { namespace: 'other' }),
    ],
    secrets: [secret('scm-creds', 'source-control', { token: 't' }), secret('plain-secret', undefined, { k: 'v' })],
  });
}

const OPTS: RuleOptions = { systemNamespace: SYSTEM_NS };

interface Case {
  rule: string;
  review: ClusterReview;
  opts?: RuleOptions;
  /** Set up the world further (e.g. a cycle partner). */
  arrange?: (w: MemoryWorld) => void;
  errors: string[];
  warnings: string[];
}

const nb = (opts: Parameters<typeof cluster>[2] = {}) => cluster('nb', 'jupyter-notebook', opts);
const create = (object: KDCluster): ClusterReview => ({ operation: 'CREATE', object });
const update = (oldObject: KDCluster, object: KDCluster): ClusterReview => ({ operation: 'UPDATE', object, oldObject });

const CASES: Case[] = [
  {
    rule: 'valid connections to allowed clusters, a labelled ConfigMap and Secret',
    review: create(
      nb({
        connections: {
          clusters: ['training', 'spark-nightly'],
          configmaps: ['model-prediction'],
          secrets: ['scm-creds'],
        },
      }),
    ),
    errors: [],
    warnings: [],
  },
  {
    rule: 'own app missing (appCatalog local)',
    review: create(cluster('nb', 'ghost-app', { appCatalog: 'local' })),
    errors: ['spec.app: app "ghost-app" not found in namespace "ml" (appCatalog "local")'],
    warnings: [],
  },
  {
    rule: 'own app missing (appCatalog system): a local app of that name does not count',
    review: create(cluster('nb', 'jupyter-notebook', { appCatalog: 'system' })),
    errors: [
      'spec.app: app "jupyter-notebook" not found in the system catalog (namespace "kd-system", appCatalog "system")',
    ],
    warnings: [],
  },
  {
    rule: 'own app missing (appCatalog unset): both places were searched',
    review: create(cluster('nb', 'ghost-app')),
    errors: ['spec.app: app "ghost-app" not found in namespace "ml" or in the system catalog (namespace "kd-system")'],
    warnings: [],
  },
  {
    rule: 'own app found in the system catalog when appCatalog is unset',
    review: create(cluster('k2', 'kafka')),
    errors: [],
    warnings: [],
  },
  {
    rule: 'own app missing on an UPDATE that keeps the app reference only warns',
    review: update(
      cluster('nb', 'ghost-app', { roles: [{ id: 'controller', members: 1 }] }),
      cluster('nb', 'ghost-app', { roles: [{ id: 'controller', members: 2 }] }),
    ),
    errors: [],
    warnings: [
      'spec.app: app "ghost-app" not found in namespace "ml" or in the system catalog (namespace "kd-system"); connections cannot be checked against its connectable_to',
    ],
  },
  {
    rule: 'own app missing: an added cluster connection is refused, naming the app; kept ones and ConfigMaps only warn',
    review: update(
      cluster('nb', 'ghost-app', { connections: { clusters: ['training'] } }),
      cluster('nb', 'ghost-app', {
        connections: { clusters: ['training', 'pg-main'], configmaps: ['model-prediction'] },
      }),
    ),
    errors: [
      'spec.connections.clusters[1]: this cluster\'s app "ghost-app" was not found in namespace "ml" or in the system catalog (namespace "kd-system"), so connectable_to cannot be checked',
    ],
    warnings: [
      'spec.app: app "ghost-app" not found in namespace "ml" or in the system catalog (namespace "kd-system"); connections cannot be checked against its connectable_to',
      `spec.connections.clusters[0]: this cluster's app "ghost-app" was not found in namespace "ml" or in the system catalog (namespace "kd-system"), so connectable_to cannot be checked; ${KEPT}`,
    ],
  },
  {
    rule: 'a generator that is not a whole number is refused here too (if the mutating webhook did not refuse it)',
    review: update(nb({ generator: 4 }), {
      ...nb(),
      spec: { ...nb().spec, configMetaGenerator: '5' as unknown as number },
    }),
    errors: [
      'spec.configMetaGenerator: must be a whole number (0 or more), not the string "5"; leave it out of manifests and the webhook sets it',
    ],
    warnings: [],
  },
  {
    rule: 'own app missing on an UPDATE that changes the app reference is an error',
    review: update(cluster('nb', 'jupyter-notebook'), cluster('nb', 'ghost-app')),
    errors: ['spec.app: app "ghost-app" not found in namespace "ml" or in the system catalog (namespace "kd-system")'],
    warnings: [],
  },
  {
    rule: 'invalid connection names (format, namespace prefix, empty, too long, not a string)',
    review: create(
      nb({
        connections: {
          clusters: ['Bad_Name', 'other/training'],
          configmaps: ['', 'a'.repeat(254)],
          secrets: [5 as unknown as string, null as unknown as string],
        },
      }),
    ),
    errors: [
      `spec.connections.clusters[0]: "Bad_Name" ${NAME_RULE}`,
      'spec.connections.clusters[1]: "other/training" must be a name in the same namespace, without a "namespace/" prefix',
      'spec.connections.configmaps[0]: "" must not be empty',
      `spec.connections.configmaps[1]: "${'a'.repeat(254)}" must be at most 253 characters (has 254)`,
      'spec.connections.secrets[0]: 5 must be a string, not number',
      'spec.connections.secrets[1]: null must be a string, not null',
    ],
    warnings: [],
  },
  {
    rule: 'duplicate entries',
    review: create(
      nb({
        connections: {
          clusters: ['training', 'training'],
          configmaps: ['model-prediction', 'plain-cm', 'model-prediction'],
        },
      }),
    ),
    errors: [
      'spec.connections.clusters[1]: duplicate entry "training" (also at index 0)',
      `spec.connections.configmaps[1]: configmap "plain-cm" ${CM_LABEL_HINT}`,
      'spec.connections.configmaps[2]: duplicate entry "model-prediction" (also at index 0)',
    ],
    warnings: [],
  },
  {
    rule: 'self-connection',
    review: create(nb({ connections: { clusters: ['nb'] } })),
    errors: ['spec.connections.clusters[0]: a cluster cannot connect to itself ("nb")'],
    warnings: [],
  },
  {
    rule: 'self-connection is refused on UPDATE even when it was already there',
    review: update(
      nb({ connections: { clusters: ['nb'] }, generator: 1 }),
      nb({ connections: { clusters: ['nb', 'training'] }, generator: 2 }),
    ),
    errors: ['spec.connections.clusters[0]: a cluster cannot connect to itself ("nb")'],
    warnings: [],
  },
  {
    rule: 'added cluster missing',
    review: create(nb({ connections: { clusters: ['training', 'ghost'] } })),
    errors: ['spec.connections.clusters[1]: cluster "ghost" not found in namespace "ml"'],
    warnings: [],
  },
  {
    rule: 'a cluster of the same name in another namespace does not count',
    review: create(cluster('pg2', 'postgres', { connections: { clusters: ['elsewhere'] } })),
    errors: ['spec.connections.clusters[0]: cluster "elsewhere" not found in namespace "ml"'],
    warnings: [],
  },
  {
    rule: 'added cluster not allowed by connectable_to (category)',
    review: create(nb({ connections: { clusters: ['pg-main'] } })),
    errors: [
      `spec.connections.clusters[0]: cluster "pg-main" uses ${PG_APP}: connectable_to of app "jupyter-notebook" does not allow it; allowed: ${NOTEBOOK_ALLOWED}`,
    ],
    warnings: [],
  },
  {
    rule: 'added cluster not allowed by connectable_to (category matches, version range does not)',
    review: create(nb({ connections: { clusters: ['spark-new'] } })),
    errors: [
      `spec.connections.clusters[0]: cluster "spark-new" uses ${SPARK3_APP}: connectable_to of app "jupyter-notebook" does not allow it; allowed: ${NOTEBOOK_ALLOWED}`,
    ],
    warnings: [],
  },
  {
    rule: 'connected cluster whose app is in the system catalog is checked against that app',
    review: create(cluster('stream', 'spark-streaming', { connections: { clusters: ['kafka-events'] } })),
    errors: [],
    warnings: [],
  },
  {
    rule: 'connectable_to empty: no cluster connections at all',
    review: create(cluster('train2', 'training-engine', { connections: { clusters: ['pg-main'] } })),
    errors: [
      `spec.connections.clusters[0]: cluster "pg-main" uses ${PG_APP}: app "training-engine" allows no cluster connections (connectable_to is empty)`,
    ],
    warnings: [],
  },
  {
    rule: 'connectable_to absent: any cluster, even one of an app no entry would match',
    review: create(cluster('pg2', 'postgres', { connections: { clusters: ['spark-new', 'training'] } })),
    errors: [],
    warnings: [],
  },
  {
    rule: "connected cluster's app missing",
    review: create(nb({ connections: { clusters: ['orphan'] } })),
    errors: [
      'spec.connections.clusters[0]: cluster "orphan" uses app "deleted-app", which was not found in namespace "ml" or in the system catalog (namespace "kd-system"); it cannot be checked against connectable_to of app "jupyter-notebook"',
    ],
    warnings: [],
  },
  {
    rule: 'missing and unlabeled ConfigMaps and Secrets',
    review: create(
      nb({
        connections: {
          configmaps: ['ghost-cm', 'plain-cm', 'other-ns-cm'],
          secrets: ['ghost-secret', 'plain-secret'],
        },
      }),
    ),
    errors: [
      'spec.connections.configmaps[0]: configmap "ghost-cm" not found in namespace "ml"',
      `spec.connections.configmaps[1]: configmap "plain-cm" ${CM_LABEL_HINT}`,
      'spec.connections.configmaps[2]: configmap "other-ns-cm" not found in namespace "ml"',
      'spec.connections.secrets[0]: secret "ghost-secret" not found in namespace "ml"',
      `spec.connections.secrets[1]: secret "plain-secret" ${SECRET_LABEL_HINT}`,
    ],
    warnings: [],
  },
  {
    rule: 'secret connections disabled',
    review: create(nb({ connections: { secrets: ['scm-creds'] } })),
    opts: { systemNamespace: SYSTEM_NS, secretConnections: false },
    errors: [
      'spec.connections.secrets[0]: secret connections are disabled in this installation (chart value secretConnections.enabled)',
    ],
    warnings: [],
  },
  {
    rule: 'dangling EXISTING connections only warn, and do not block an unrelated change',
    review: update(
      nb({
        connections: { clusters: ['ghost', 'pg-main'], configmaps: ['gone-cm'], secrets: ['plain-secret'] },
        generator: 3,
      }),
      nb({
        connections: {
          clusters: ['ghost', 'pg-main', 'training'],
          configmaps: ['gone-cm', 'model-prediction'],
          secrets: ['plain-secret'],
        },
        generator: 4,
      }),
    ),
    errors: [],
    warnings: [
      `spec.connections.clusters[0]: cluster "ghost" not found in namespace "ml"; ${KEPT}`,
      `spec.connections.clusters[1]: cluster "pg-main" uses ${PG_APP}: connectable_to of app "jupyter-notebook" does not allow it; allowed: ${NOTEBOOK_ALLOWED}; ${KEPT}`,
      `spec.connections.configmaps[0]: configmap "gone-cm" not found in namespace "ml"; ${KEPT}`,
      `spec.connections.secrets[0]: secret "plain-secret" ${SECRET_LABEL_HINT}; ${KEPT}`,
    ],
  },
  {
    rule: 'an existing Secret connection when secret connections get disabled only warns',
    review: update(
      nb({ connections: { secrets: ['scm-creds'] }, generator: 1 }),
      nb({ connections: { secrets: ['scm-creds'], configmaps: ['model-prediction'] }, generator: 2 }),
    ),
    opts: { systemNamespace: SYSTEM_NS, secretConnections: false },
    errors: [],
    warnings: [
      `spec.connections.secrets[0]: secret connections are disabled in this installation (chart value secretConnections.enabled); ${KEPT}`,
    ],
  },
  {
    rule: 'a dangling connection that is re-added after removal is checked again (it is added)',
    review: update(nb({ generator: 3 }), nb({ connections: { clusters: ['ghost'] }, generator: 4 })),
    errors: ['spec.connections.clusters[0]: cluster "ghost" not found in namespace "ml"'],
    warnings: [],
  },
  {
    rule: 'generator lowered',
    review: update(
      nb({ connections: { clusters: ['training'] }, generator: 5 }),
      nb({ connections: { clusters: ['training'] }, generator: 3 }),
    ),
    errors: [
      'spec.configMetaGenerator: may not be lowered (from 5 to 3); it counts configmeta regenerations and only goes up',
    ],
    warnings: [],
  },
  {
    rule: 'generator removed',
    review: update(
      nb({ connections: { clusters: ['training'] }, generator: 5 }),
      nb({ connections: { clusters: ['training'] } }),
    ),
    errors: [
      'spec.configMetaGenerator: may not be removed (it is 5); leave it out of manifests and the webhook keeps it',
    ],
    warnings: [],
  },
  {
    rule: "the reconciler's bump (only the generator changes) is never denied by dangling connections",
    review: update(
      cluster('nb', 'ghost-app', { connections: { clusters: ['ghost'], configmaps: ['plain-cm'] }, generator: 2 }),
      cluster('nb', 'ghost-app', { connections: { clusters: ['ghost'], configmaps: ['plain-cm'] }, generator: 3 }),
    ),
    errors: [],
    warnings: [
      'spec.app: app "ghost-app" not found in namespace "ml" or in the system catalog (namespace "kd-system"); connections cannot be checked against its connectable_to',
      `spec.connections.clusters[0]: cluster "ghost" not found in namespace "ml"; ${KEPT}`,
      `spec.connections.configmaps[0]: configmap "plain-cm" ${CM_LABEL_HINT}; ${KEPT}`,
    ],
  },
  {
    rule: 'generator raised (a forced refresh) is allowed',
    review: update(
      nb({ connections: { clusters: ['training'] }, generator: 5 }),
      nb({ connections: { clusters: ['training'] }, generator: 6 }),
    ),
    errors: [],
    warnings: [],
  },
  {
    rule: 'generator set for the first time is allowed',
    review: update(
      nb({ connections: { clusters: ['training'] } }),
      nb({ connections: { clusters: ['training'] }, generator: 1 }),
    ),
    errors: [],
    warnings: [],
  },
  {
    rule: 'several violations are reported together, in field order, generator last',
    review: update(
      nb({ connections: { clusters: ['training'] }, generator: 7 }),
      nb({
        connections: {
          clusters: ['training', 'ghost', 'pg-main', 'nb', 'ghost', 'Bad'],
          configmaps: ['plain-cm'],
          secrets: ['ghost-secret'],
        },
        generator: 2,
      }),
    ),
    errors: [
      'spec.connections.clusters[1]: cluster "ghost" not found in namespace "ml"',
      `spec.connections.clusters[2]: cluster "pg-main" uses ${PG_APP}: connectable_to of app "jupyter-notebook" does not allow it; allowed: ${NOTEBOOK_ALLOWED}`,
      'spec.connections.clusters[3]: a cluster cannot connect to itself ("nb")',
      'spec.connections.clusters[4]: duplicate entry "ghost" (also at index 1)',
      `spec.connections.clusters[5]: "Bad" ${NAME_RULE}`,
      `spec.connections.configmaps[0]: configmap "plain-cm" ${CM_LABEL_HINT}`,
      'spec.connections.secrets[0]: secret "ghost-secret" not found in namespace "ml"',
      'spec.configMetaGenerator: may not be lowered (from 7 to 2); it counts configmeta regenerations and only goes up',
    ],
    warnings: [],
  },
  {
    rule: 'warning: an added connected cluster has no ready members yet',
    review: create(nb({ connections: { clusters: ['cold', 'training'] } })),
    errors: [],
    warnings: [
      'spec.connections.clusters[0]: cluster "cold" has no ready members yet; its section of configmeta fills in as they come up',
    ],
  },
  {
    rule: 'no "no ready members" warning for a connection that was already there',
    review: update(
      nb({ connections: { clusters: ['cold'] }, generator: 1 }),
      nb({ connections: { clusters: ['cold', 'training'] }, generator: 2 }),
    ),
    errors: [],
    warnings: [],
  },
  {
    rule: 'warning: a connection cycle (two clusters)',
    arrange: (w) =>
      w.addCluster(cluster('pg-replica', 'postgres', { ready: 1, connections: { clusters: ['pg-main'] } })),
    review: update(
      cluster('pg-main', 'postgres', { ready: 1 }),
      cluster('pg-main', 'postgres', { ready: 1, connections: { clusters: ['pg-replica'] } }),
    ),
    errors: [],
    warnings: [
      'spec.connections.clusters: connection cycle pg-main → pg-replica → pg-main; allowed (each cluster sees the others one hop deep)',
    ],
  },
  {
    rule: 'warning: a connection cycle through a third cluster',
    arrange: (w) => {
      w.addCluster(cluster('pg-b', 'postgres', { ready: 1, connections: { clusters: ['pg-c'] } }));
      w.addCluster(cluster('pg-c', 'postgres', { ready: 1, connections: { clusters: ['pg-a', 'training'] } }));
    },
    review: create(cluster('pg-a', 'postgres', { connections: { clusters: ['pg-b'] } })),
    errors: [],
    warnings: [
      'spec.connections.clusters: connection cycle pg-a → pg-b → pg-c → pg-a; allowed (each cluster sees the others one hop deep)',
    ],
  },
  {
    rule: 'a chain without a cycle gives no cycle warning',
    arrange: (w) => w.addCluster(cluster('pg-b', 'postgres', { ready: 1, connections: { clusters: ['pg-main'] } })),
    review: create(cluster('pg-a', 'postgres', { connections: { clusters: ['pg-b'] } })),
    errors: [],
    warnings: [],
  },
  {
    rule: 'deletionTimestamp: writes during deletion are never blocked',
    review: update(nb({ generator: 9 }), {
      ...nb({ connections: { clusters: ['ghost', 'nb'] }, generator: 1 }),
      metadata: { ...nb().metadata, deletionTimestamp: '2024-05-01T10:00:00Z', finalizers: [] },
    }),
    errors: [],
    warnings: [],
  },
  {
    rule: 'unchanged spec: an UPDATE of labels only is not checked again',
    review: update(
      nb({ connections: { clusters: ['ghost', 'pg-main'] }, generator: 1 }),
      nb({ connections: { clusters: ['ghost', 'pg-main'] }, generator: 1, labels: { team: 'a' } }),
    ),
    errors: [],
    warnings: [],
  },
  {
    rule: 'spec missing',
    review: { operation: 'CREATE', object: { metadata: { name: 'x', namespace: NS } } as unknown as KDCluster },
    errors: ['spec: required'],
    warnings: [],
  },
];

describe('validateCluster rule table', () => {
  it.each(CASES.map((c) => [c.rule, c] as const))('%s', async (_rule, c) => {
    const w = world();
    c.arrange?.(w);
    const result = await validateCluster(c.review, w, c.opts ?? OPTS);
    expect(result.errors.map(formatFieldError)).toEqual(c.errors);
    expect(result.warnings).toEqual(c.warnings);
  });

  it('never reads a Secret when secret connections are disabled', async () => {
    const w = world();
    await validateCluster(create(nb({ connections: { secrets: ['scm-creds'] } })), w, {
      systemNamespace: SYSTEM_NS,
      secretConnections: false,
    });
    expect(w.reads.filter((r) => r.startsWith('Secret '))).toEqual([]);
  });

  it('looks up connections in the cluster namespace only', async () => {
    const w = world();
    await validateCluster(
      create(nb({ connections: { clusters: ['training'], configmaps: ['model-prediction'] } })),
      w,
      OPTS,
    );
    const objectReads = w.reads.filter((r) => !r.startsWith('KubeDirectorApp'));
    expect(objectReads.length).toBeGreaterThan(0);
    for (const r of objectReads) expect(r).toMatch(/ ml\//);
  });

  it('an app name no object can have is refused without a lookup, and a megabyte of it is not echoed', async () => {
    const w = world();
    const huge = 'é'.repeat(1 << 20);
    const result = await validateCluster(
      create(cluster('nb', huge, { connections: { clusters: ['training', 'x'.repeat(1 << 20)] } })),
      w,
      OPTS,
    );
    const errors = result.errors.map(formatFieldError);
    expect(errors).toEqual([
      `spec.app: "${'é'.repeat(256)}…" must be at most 253 characters (has ${1 << 20})`,
      `spec.connections.clusters[0]: this cluster's app "${'é'.repeat(256)}…" was not found in namespace "ml" or in the system catalog (namespace "kd-system"), so connectable_to cannot be checked`,
      `spec.connections.clusters[1]: "${'x'.repeat(256)}…" must be at most 253 characters (has ${1 << 20})`,
    ]);
    // The connected cluster's app is read; the invalid one never.
    expect(w.reads.filter((r) => r.startsWith('KubeDirectorApp'))).toEqual(['KubeDirectorApp ml/training-engine']);
    // An invalid name of valid length: refused the same way, on an update that changes it.
    const renamed = await validateCluster(update(nb(), cluster('nb', 'Bad_App')), world(), OPTS);
    expect(renamed.errors.map(formatFieldError)).toEqual([`spec.app: "Bad_App" ${NAME_RULE}`]);
  });

  it('a name longer than a label value is refused on create only (member pods carry it in a label)', async () => {
    const long = 'n'.repeat(64);
    const created = await validateCluster(create(cluster(long, 'jupyter-notebook')), world(), OPTS);
    expect(created.errors.map(formatFieldError)).toEqual([
      `metadata.name: "${long}" has 64 characters; a KubeDirectorCluster's name must be at most 63, because its member pods carry it in the label kubedirector.hpe.com/kdcluster`,
    ]);
    // Reported with the other violations, not instead of them.
    const noSpec = { metadata: { name: long, namespace: NS } } as unknown as KDCluster;
    expect((await validateCluster(create(noSpec), world(), OPTS)).errors.map(formatFieldError)).toEqual([
      created.errors.map(formatFieldError)[0],
      'spec: required',
    ]);
    expect((await validateCluster(create(cluster('n'.repeat(63), 'jupyter-notebook')), world(), OPTS)).errors).toEqual(
      [],
    );
    // One that exists already (created while the webhook was down) can still be edited.
    const edited = await validateCluster(
      update(
        cluster(long, 'jupyter-notebook'),
        cluster(long, 'jupyter-notebook', { connections: { configmaps: ['model-prediction'] } }),
      ),
      world(),
      OPTS,
    );
    expect(edited.errors).toEqual([]);
  });

  it('the denial message has one line per violation, each with its field path', async () => {
    const result = await validateCluster(
      create(nb({ connections: { clusters: ['ghost', 'nb'], configmaps: ['plain-cm'] } })),
      world(),
      OPTS,
    );
    expect(denialMessage('KubeDirectorCluster', NS, 'nb', result.errors)).toBe(
      [
        'KubeDirectorCluster ml/nb is not valid (3 problems):',
        '- spec.connections.clusters[0]: cluster "ghost" not found in namespace "ml"',
        '- spec.connections.clusters[1]: a cluster cannot connect to itself ("nb")',
        `- spec.connections.configmaps[0]: configmap "plain-cm" ${CM_LABEL_HINT}`,
      ].join('\n'),
    );
    expect(denialMessage('KubeDirectorCluster', NS, 'nb', result.errors.slice(0, 1))).toMatch(/\(1 problem\):\n/);
  });
});
