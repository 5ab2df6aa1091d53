/**
 * Namespaces made by the harness: created together with what the API server needs before it admits a pod
 * there. Free of jest imports, so the bench uses it too.
 */
import { ApiException, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

/**
 * Creates a namespace and its `default` ServiceAccount. The API server's ServiceAccount admission refuses
 * pods (also dry-run ones) until that account exists, and the controller-manager that would create it runs
 * only with the node, a moment after the namespace appears; creating it here means no test races it.
 * AlreadyExists is fine: the controller got there first.
 */
export async function createNamespace(
  kc: KubeConfig,
  name: string,
  labels: Record<string, string> = { 'kd-test': 'true' },
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name, labels } } });
  await core
    .createNamespacedServiceAccount({ namespace: name, body: { metadata: { name: 'default' } } })
    .catch((e: unknown) => {
      if (!(e instanceof ApiException && e.code === 409)) throw e;
    });
}
