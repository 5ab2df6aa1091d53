/**
 * CRDs shaped like KubeDirector's (names, group, version and schema behaviour), written for the tests
 * from the facts in docs (not copied): the kdcluster CRD does not preserve unknown spec or status
 * fields (so kd-connections' configMetaGenerator and status fields are pruned) and declares
 * KubeDirector's status; the kdapp CRD preserves unknown spec fields (category, connectable_to
 * survive); kubedirectorconfigs exists only where KubeDirector is installed. Cluster-scoped: use them
 * on a dedicated control plane only.
 */
import { ok, sleep } from './processes.js';
import type { TestEnv } from './cluster.js';
import { waitEstablished } from './crds.js';

const str = { type: 'string' };
const int = { type: 'integer' };
const bool = { type: 'boolean' };
const strings = { type: 'array', items: str };
/** What every object has, as both kinds declare it. */
const OBJECT_BASE = { apiVersion: str, kind: str, metadata: { type: 'object' } };

function crd(plural: string, kind: string, shortName: string, schema: object, status: boolean): object {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.kubedirector.hpe.com` },
    spec: {
      group: 'kubedirector.hpe.com',
      names: { kind, listKind: `${kind}List`, plural, singular: plural.replace(/s$/, ''), shortNames: [shortName] },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1beta1',
          served: true,
          storage: true,
          ...(status ? { subresources: { status: {} } } : {}),
          schema: { openAPIV3Schema: schema },
        },
      ],
    },
  };
}

/** KubeDirector's status fields a test writer sets and expects back. */
export const KD_STATUS_SCHEMA = {
  type: 'object',
  nullable: true,
  properties: {
    state: str,
    generationUID: str,
    lastConnectionHash: str,
    specGenerationToProcess: int,
    clusterService: str,
    lastNodeID: int,
    memberStateRollup: {
      type: 'object',
      properties: { membershipChanging: bool, membersDown: bool, configErrors: bool },
    },
    roles: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          id: str,
          statefulSet: str,
          members: {
            type: 'array',
            items: { type: 'object', properties: { pod: str, nodeID: int, service: str, state: str } },
          },
        },
      },
    },
  },
};

export const KD_CLUSTER_CRD = crd(
  'kubedirectorclusters',
  'KubeDirectorCluster',
  'kdcluster',
  {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata', 'spec'],
    properties: {
      ...OBJECT_BASE,
      spec: {
        type: 'object',
        required: ['app', 'roles'],
        properties: {
          app: { type: 'string', minLength: 1 },
          appCatalog: { type: 'string', pattern: '^local$|^system$' },
          connections: {
            type: 'object',
            properties: { clusters: strings, configmaps: strings, secrets: strings },
          },
          roles: {
            type: 'array',
            items: {
              type: 'object',
              required: ['id'],
              properties: {
                id: str,
                members: int,
                resources: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
              },
            },
          },
        },
      },
      status: KD_STATUS_SCHEMA,
    },
  },
  true,
);

export const KD_APP_CRD = crd(
  'kubedirectorapps',
  'KubeDirectorApp',
  'kdapp',
  {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata', 'spec'],
    properties: {
      ...OBJECT_BASE,
      spec: {
        type: 'object',
        'x-kubernetes-preserve-unknown-fields': true,
        properties: { label: { type: 'object', properties: { name: str } }, distroID: str, version: str },
      },
    },
  },
  false,
);

export const KD_CONFIG_CRD = crd(
  'kubedirectorconfigs',
  'KubeDirectorConfig',
  'kdconfig',
  { type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } },
  true,
);

/**
 * Installs the KubeDirector-shaped CRDs (replacing kd-connections' where present) and waits until they
 * are served and the kdcluster schema is published without configMetaGenerator.
 */
export async function installKubeDirectorCrds(target: Pick<TestEnv, 'kubectl'>, withOperator = true): Promise<void> {
  const items = [KD_CLUSTER_CRD, KD_APP_CRD, ...(withOperator ? [KD_CONFIG_CRD] : [])];
  ok(
    await target.kubectl(['apply', '--server-side', '--force-conflicts', '-f', '-'], {
      namespace: false,
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items }),
    }),
    'apply KubeDirector-shaped CRDs',
  );
  const names = items.map((c) => `crd/${(c as { metadata: { name: string } }).metadata.name}`);
  await waitEstablished(target, names);
  for (let i = 0; ; i++) {
    const r = await target.kubectl(['get', '--raw', '/openapi/v3/apis/kubedirector.hpe.com/v1beta1'], {
      namespace: false,
    });
    if (r.code === 0 && r.stdout.includes('lastConnectionHash')) return;
    if (i > 120) throw new Error('the KubeDirector-shaped kdcluster schema was not published in 60 s');
    await sleep(500);
  }
}
