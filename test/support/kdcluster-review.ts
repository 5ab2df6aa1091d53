/**
 * A kdcluster CREATE review as the API server sends it (request and object alike), for tests that post
 * reviews straight to the admission port, and the probes an existence oracle would use.
 */
export function kdclusterReview(
  namespace: string,
  spec: Record<string, unknown>,
  o: { uid?: string; objectNamespace?: string } = {},
) {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: o.uid ?? '5c0be000-0000-4000-8000-00000000000a',
      kind: { group: 'kubedirector.hpe.com', version: 'v1beta1', kind: 'KubeDirectorCluster' },
      resource: { group: 'kubedirector.hpe.com', version: 'v1beta1', resource: 'kubedirectorclusters' },
      operation: 'CREATE',
      namespace,
      name: 'probe',
      object: {
        apiVersion: 'kubedirector.hpe.com/v1beta1',
        kind: 'KubeDirectorCluster',
        metadata: { name: 'probe', namespace: o.objectNamespace ?? namespace },
        spec,
      },
    },
  };
}

/**
 * Pairs of probes over the examples (examples/10-apps.yaml, 20-configmaps.yaml, 30-secrets.yaml): the
 * first names an object that exists, the second one that does not.
 */
export const EXISTENCE_PROBES: [what: string, exists: Record<string, unknown>, missing: Record<string, unknown>][] = [
  ['app', { app: 'postgres' }, { app: 'no-such-app' }],
  [
    'ConfigMap',
    { app: 'jupyter-notebook', connections: { configmaps: ['model-prediction'] } },
    { app: 'jupyter-notebook', connections: { configmaps: ['no-such-cm'] } },
  ],
  [
    'Secret',
    { app: 'jupyter-notebook', connections: { secrets: ['scm-creds'] } },
    { app: 'jupyter-notebook', connections: { secrets: ['no-such-secret'] } },
  ],
];
