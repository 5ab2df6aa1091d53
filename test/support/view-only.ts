/**
 * A user with what the aggregated `view` ClusterRole grants of the kinds these tests involve —
 * everything but Secrets. The test control plane runs no role aggregation, so `view` itself is empty
 * there; this Role (and its binding to `user`) stands in for it in the test namespace.
 */
export function viewOnly(user: string): Record<string, unknown>[] {
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'viewer' },
      rules: [
        {
          apiGroups: ['kubedirector.hpe.com'],
          resources: ['kubedirectorclusters', 'kubedirectorclusters/status', 'kubedirectorapps'],
          verbs: ['get', 'list', 'watch'],
        },
        {
          apiGroups: [''],
          resources: ['pods', 'pods/status', 'configmaps', 'events', 'services', 'endpoints', 'serviceaccounts'],
          verbs: ['get', 'list', 'watch'],
        },
        { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'viewer' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'viewer' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    },
  ];
}
