/**
 * Whether KubeDirector runs where this installation runs: pure judgement over what the guard read.
 *
 * - KubeDirector's deployment always creates kubedirectorconfigs (and kubedirectorstatusbackups), its
 *   operator needs them, and kd-connections never installs them: their presence means the operator is
 *   (or was) installed. Discovery, readable by every authenticated client.
 * - kd-connections' own kdcluster CRD declares spec.configMetaGenerator and status.lastConfigMetaGenerator;
 *   KubeDirector's prunes both, so without them every write of the services would be thrown away. The
 *   published OpenAPI v3 schema, readable by every authenticated client.
 * - The operator itself, by name: the webhook configuration it registers when it starts, and its
 *   Deployment `kubedirector` (deploy/kubedirector/deployment-prebuilt.yaml; the operator finds itself by
 *   OPERATOR_NAME, so the name is fixed) in the namespace its webhook's Service names, and in `default`
 *   and `kubedirector` (where its deploy/ and docs put it). The chart grants `get` of those two names only;
 *   without it (a service run with less, or watchNamespaces) they are unknown, and the other findings
 *   still count.
 */

/** Resources of the group that only KubeDirector installs. */
export const KUBEDIRECTOR_ONLY_RESOURCES = ['kubedirectorconfigs', 'kubedirectorstatusbackups'] as const;

/** Fields of the kdcluster schema kd-connections' default mode writes and reads. */
export const NEEDED_CLUSTER_FIELDS = ['spec.configMetaGenerator', 'status.lastConfigMetaGenerator'] as const;

/** KubeDirector's Deployment (and OPERATOR_NAME) in its deploy/ tree. */
export const KUBEDIRECTOR_OPERATOR_NAME = 'kubedirector';

/** The MutatingWebhookConfiguration KubeDirector's operator registers at start. */
export const KUBEDIRECTOR_WEBHOOK_CONFIGURATION = 'kubedirector-webhook';

/** Where KubeDirector's deploy/ and quickstart put the operator, besides its webhook Service's namespace. */
export const KUBEDIRECTOR_USUAL_NAMESPACES = ['default', 'kubedirector'] as const;

/** What the guard reads of KubeDirector's webhook configuration. */
export interface OperatorWebhookConfiguration {
  webhooks?: { clientConfig?: { service?: { namespace?: string } } }[];
}

/** The namespaces to look for the operator's Deployment in: its webhook Service's, then the usual ones. */
export function operatorNamespaces(webhook: OperatorWebhookConfiguration | undefined): string[] {
  const named = (webhook?.webhooks ?? [])
    .map((w) => w.clientConfig?.service?.namespace)
    .filter((n): n is string => !!n);
  return [...new Set([...named, ...KUBEDIRECTOR_USUAL_NAMESPACES])];
}

/** The OpenAPI v3 component name the API server gives the kdcluster schema. */
export const KDCLUSTER_OPENAPI_COMPONENT = 'com.hpe.kubedirector.v1beta1.KubeDirectorCluster';

export interface ApiObservation {
  /** Resource names served by kubedirector.hpe.com/v1beta1; undefined when the group is not served. */
  resources: string[] | undefined;
  /** The published kdcluster schema; undefined when none is published (yet). */
  clusterSchema: unknown;
  /** "namespace/name" of each Deployment named KUBEDIRECTOR_OPERATOR_NAME found; undefined when none could be read. */
  operatorDeployments?: string[];
  /** Whether KUBEDIRECTOR_WEBHOOK_CONFIGURATION exists; undefined when not readable. */
  operatorWebhook?: boolean;
}

function property(schema: unknown, path: string): unknown {
  let at: unknown = schema;
  for (const key of path.split('.')) {
    const props = (at as { properties?: Record<string, unknown> } | null)?.properties;
    at = props && typeof props === 'object' ? props[key] : undefined;
    if (at === undefined) return undefined;
  }
  return at;
}

/** What points at KubeDirector, one sentence each; empty when nothing does. */
export function kubeDirectorFindings(o: ApiObservation): string[] {
  const out: string[] = [];
  const only = (o.resources ?? []).filter((r) => (KUBEDIRECTOR_ONLY_RESOURCES as readonly string[]).includes(r));
  if (only.length > 0) {
    out.push(
      `KubeDirector's operator is installed (the API serves ${only.map((r) => `${r}.kubedirector.hpe.com`).join(' and ')})`,
    );
  }
  if (o.operatorDeployments?.length) {
    out.push(`KubeDirector's operator Deployment exists (${o.operatorDeployments.join(', ')})`);
  }
  if (o.operatorWebhook) {
    out.push(`KubeDirector's operator registered its webhook configuration ${KUBEDIRECTOR_WEBHOOK_CONFIGURATION}`);
  }
  if (o.resources?.includes('kubedirectorclusters') && o.clusterSchema !== undefined) {
    const missing = NEEDED_CLUSTER_FIELDS.filter((f) => property(o.clusterSchema, f) === undefined);
    if (missing.length > 0) {
      out.push(
        `the kubedirectorclusters CRD is not kd-connections' (its schema has no ${missing.join(' and ')}, so they would be pruned)`,
      );
    }
  }
  return out;
}

/** The log line and event note: what was found and what to set. */
export function kubeDirectorGuardMessage(component: string, findings: string[]): string {
  return (
    `${component} is not acting: ${findings.join('; ')}. In its default mode kd-connections owns the ` +
    'kdcluster CRD and fields KubeDirector prunes. To run next to KubeDirector set kubedirector.enabled=true ' +
    '(helm upgrade <release> <chart> --reuse-values --set kubedirector.enabled=true; admission flag ' +
    "--kubedirector-mode=true, and no reconciler); or remove KubeDirector and install the chart's CRDs"
  );
}
