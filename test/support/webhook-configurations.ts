/**
 * The four kd-connections webhooks as the chart's out-of-cluster `url` mode registers them: validating
 * Fail, mutating Ignore, v1 only, sideEffects None, pods only when they carry the kdcluster label.
 * Always `clientConfig.url` (on 127.0.0.1 in tests and local mode), never `clientConfig.service`.
 * No jest dependency: `npm start` uses it too.
 *
 * A registration counts as live only when the API server demonstrably calls it (the marker technique of
 * the Kubernetes e2e suite): a dry-run kdcluster with a missing app is denied only by the validating
 * webhook; a dry-run kdcluster and pod come back mutated only through the mutating one.
 */
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1LabelSelector,
  type V1MutatingWebhook,
  type V1ValidatingWebhook,
} from '@kubernetes/client-node';

export const WEBHOOK_NAMES = {
  validateCluster: 'validate-kdcluster.kd-connections.hpe.com',
  validateApp: 'validate-kdapp.kd-connections.hpe.com',
  mutateCluster: 'mutate-kdcluster.kd-connections.hpe.com',
  mutatePod: 'mutate-pod.kd-connections.hpe.com',
};

const G = { group: 'kubedirector.hpe.com', version: 'v1beta1' } as const;

export interface WebhookOptions {
  /** e.g. https://127.0.0.1:9443 */
  baseUrl: string;
  /** Left out (undefined) for a certificate bootstrapper to fill in. */
  caBundle: string | undefined;
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
      apiGroups: [G.group],
      apiVersions: [G.version],
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

export interface Registration {
  name: string;
  remove(): Promise<void>;
}

/**
 * Registers the four webhooks for one namespace, as the chart does in its out-of-cluster `url` mode:
 * validating Fail, mutating Ignore, v1 only, sideEffects None, pods only with the kdcluster label.
 */
/** The cluster a test registers in: its client, its namespace and the CA of its webhook serving pair. */
export interface RegistrationTarget {
  readonly kc: KubeConfig;
  readonly namespace: string;
  readonly info: { readonly webhookCaPem: string };
}

/**
 * Registers the four webhooks for one namespace, as the chart does in its out-of-cluster `url` mode.
 * caBundle false: left out, for a certificate bootstrapper to fill in.
 */
export async function registerWebhooks(
  env: RegistrationTarget,
  svc: { url(path: string): string },
  opts: { caBundle?: false } = {},
): Promise<Registration> {
  const admission = env.kc.makeApiClient(AdmissionregistrationV1Api);
  const name = `kd-admission-${env.namespace}`;
  const { validating, mutating } = webhookConfigurations({
    baseUrl: svc.url(''),
    caBundle: opts.caBundle === false ? undefined : Buffer.from(env.info.webhookCaPem).toString('base64'),
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': env.namespace } },
  });
  await admission.createValidatingWebhookConfiguration({ body: { metadata: { name }, webhooks: validating } });
  await admission.createMutatingWebhookConfiguration({ body: { metadata: { name }, webhooks: mutating } });
  return {
    name,
    async remove() {
      await admission.deleteValidatingWebhookConfiguration({ name }).catch(() => undefined);
      await admission.deleteMutatingWebhookConfiguration({ name }).catch(() => undefined);
    },
  };
}

/**
 * Waits until the API server calls both configurations. Creates (for real) a kdapp and a labelled
 * ConfigMap the mutating markers need; everything else is dry-run.
 */
export async function waitUntilLive(env: Omit<RegistrationTarget, 'info'>, timeoutMs = 30_000): Promise<void> {
  const ns = env.namespace;
  const custom = env.kc.makeApiClient(CustomObjectsApi);
  const core = env.kc.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({
    namespace: ns,
    body: { metadata: { name: 'marker-cm', labels: { 'kubedirector.hpe.com/cmType': 'marker' } } },
  });
  const end = Date.now() + timeoutMs;
  const until = async (what: string, live: () => Promise<boolean>) => {
    while (!(await live())) {
      if (Date.now() > end) throw new Error(`webhook configuration not live after ${timeoutMs} ms: ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const cluster = (name: string, spec: Record<string, unknown>) =>
    custom.createNamespacedCustomObject({
      ...G,
      plural: 'kubedirectorclusters',
      namespace: ns,
      dryRun: 'All',
      body: { apiVersion: `${G.group}/${G.version}`, kind: 'KubeDirectorCluster', metadata: { name }, spec },
    });
  await until('validating (marker kdcluster with a missing app denied)', async () => {
    try {
      await cluster('marker-validating', { app: 'marker-app-that-does-not-exist' });
      return false;
    } catch (e) {
      const body = String((e as { body?: unknown }).body ?? '');
      if ((e as { code?: number }).code === 403 && body.includes(WEBHOOK_NAMES.validateCluster)) return true;
      throw e;
    }
  });
  // The kdapp goes through the (now live) validating kdapp webhook.
  await custom.createNamespacedCustomObject({
    ...G,
    plural: 'kubedirectorapps',
    namespace: ns,
    body: {
      apiVersion: `${G.group}/${G.version}`,
      kind: 'KubeDirectorApp',
      metadata: { name: 'marker-app' },
      spec: { label: { name: 'marker' }, distroID: 'kd/marker', version: '1', category: 'marker' },
    },
  });
  await until('mutating kdcluster (dry-run create comes back with a generator)', async () => {
    const got = (await cluster('marker-mutating', {
      app: 'marker-app',
      connections: { configmaps: ['marker-cm'] },
    })) as { spec?: { configMetaGenerator?: number } };
    return got.spec?.configMetaGenerator === 1;
  });
  await until('mutating pod (dry-run member pod comes back with the volume)', async () => {
    const pod = await core.createNamespacedPod({
      namespace: ns,
      dryRun: 'All',
      body: {
        metadata: { name: 'marker-pod', labels: { 'kubedirector.hpe.com/kdcluster': 'marker' } },
        spec: { containers: [{ name: 'c', image: 'busybox:1.36' }] },
      },
    });
    return (pod.spec?.volumes ?? []).some((v) => v.name === 'kd-configmeta');
  });
}
