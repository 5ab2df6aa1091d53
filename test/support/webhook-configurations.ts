/**
 * The four kd-connections webhooks as the chart's out-of-cluster `url` mode registers them: validating
 * Fail, mutating Ignore, v1 only, sideEffects None, pods only when they carry the kdcluster label.
 * Always `clientConfig.url` (on 127.0.0.1 in tests and local mode), never `clientConfig.service`.
 * No jest dependency: `npm start` uses it too.
 */
import type { V1MutatingWebhook, V1ValidatingWebhook, V1LabelSelector } from '@kubernetes/client-node';

export const WEBHOOK_NAMES = {
  validateCluster: 'validate-kdcluster.kd-connections.hpe.com',
  validateApp: 'validate-kdapp.kd-connections.hpe.com',
  mutateCluster: 'mutate-kdcluster.kd-connections.hpe.com',
  mutatePod: 'mutate-pod.kd-connections.hpe.com',
};

export interface WebhookOptions {
  /** e.g. https://127.0.0.1:9443 */
  baseUrl: string;
  caBundle: string;
  namespaceSelector: V1LabelSelector;
  timeoutSeconds?: number;
}

export function webhookConfigurations(o: WebhookOptions): {
  validating: V1ValidatingWebhook[];
  mutating: V1MutatingWebhook[];
} {
  const common = {
    namespaceSelector: o.namespaceSelector,
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    matchPolicy: 'Equivalent',
    timeoutSeconds: o.timeoutSeconds ?? 5,
  };
  const url = (path: string) => ({ url: `${o.baseUrl}${path}`, caBundle: o.caBundle });
  const kd = (resource: string) => [
    {
      apiGroups: ['kubedirector.hpe.com'],
      apiVersions: ['v1beta1'],
      operations: ['CREATE', 'UPDATE'],
      resources: [resource],
      scope: 'Namespaced',
    },
  ];
  return {
    validating: [
      {
        name: WEBHOOK_NAMES.validateCluster,
        clientConfig: url('/validate-kdcluster'),
        rules: kd('kubedirectorclusters'),
        failurePolicy: 'Fail',
        ...common,
      },
      {
        name: WEBHOOK_NAMES.validateApp,
        clientConfig: url('/validate-kdapp'),
        rules: kd('kubedirectorapps'),
        failurePolicy: 'Fail',
        ...common,
      },
    ],
    mutating: [
      {
        name: WEBHOOK_NAMES.mutateCluster,
        clientConfig: url('/mutate-kdcluster'),
        rules: kd('kubedirectorclusters'),
        failurePolicy: 'Ignore',
        reinvocationPolicy: 'Never',
        ...common,
      },
      {
        name: WEBHOOK_NAMES.mutatePod,
        clientConfig: url('/mutate-pod'),
        rules: [
          { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' },
        ],
        // Only member pods are sent at all.
        objectSelector: { matchExpressions: [{ key: 'kubedirector.hpe.com/kdcluster', operator: 'Exists' }] },
        failurePolicy: 'Ignore',
        reinvocationPolicy: 'Never',
        ...common,
      },
    ],
  };
}
