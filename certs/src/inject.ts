/**
 * Writing webhook configurations (caBundle, and the admission service's webhook paths) with a JSON Patch
 * computed from a fresh read and guarded by the resourceVersion read and by each patched webhook's name at
 * its index: a configuration changed between read and write is never overwritten; the write fails and is
 * computed again from what the other writer left. inject-ca and the admission service both write here.
 */
import { errorMessage, errorStatus, isConflict, type KubeClient } from '@kd-connections/shared/runtime';
import { CertificateError, parseCertificates, type CertificateInfo } from './inspect.js';

export type WebhookConfigurationKind = 'validating' | 'mutating';

export interface WebhookConfigurationRef {
  kind: WebhookConfigurationKind;
  name: string;
}

export type JsonPatchOp = { op: 'test' | 'add'; path: string; value: unknown };

/** The part of a webhook configuration that is read. */
export interface WebhookConfigurationView {
  metadata?: { name?: string; resourceVersion?: string };
  webhooks?: {
    name: string;
    clientConfig?: { caBundle?: string; url?: string; service?: { name?: string; namespace?: string; path?: string } };
  }[];
}

/** The two API calls made; an interface so tests can supply their own. */
export interface WebhookConfigurationClient {
  read(ref: WebhookConfigurationRef): Promise<WebhookConfigurationView>;
  patch(ref: WebhookConfigurationRef, ops: JsonPatchOp[]): Promise<WebhookConfigurationView>;
}

export function describeRef(ref: WebhookConfigurationRef): string {
  return `${ref.kind === 'validating' ? 'ValidatingWebhookConfiguration' : 'MutatingWebhookConfiguration'} ${ref.name}`;
}

/** A client on the project's Kubernetes client (its user agent names the caller). */
export function webhookConfigurationClient(client: KubeClient): WebhookConfigurationClient {
  const path = (ref: WebhookConfigurationRef) =>
    `/apis/admissionregistration.k8s.io/v1/${ref.kind}webhookconfigurations/${encodeURIComponent(ref.name)}`;
  return {
    read: (ref) => client.get<WebhookConfigurationView>(path(ref)),
    patch: (ref, ops) => client.jsonPatch<WebhookConfigurationView>(path(ref), ops),
  };
}

/**
 * The caBundle field value (base64 of the PEM) for a CA file's content. Refuses anything that is not a
 * list of CA certificates: a private key or a serving certificate passed by mistake must not be published.
 */
export function encodeCABundle(pem: string, what = 'CA bundle'): { caBundle: string; cas: CertificateInfo[] } {
  const cas = parseCertificates(pem, what);
  const leaf = cas.find((c) => !c.isCA);
  if (leaf) {
    throw new CertificateError(
      `${what}: ${JSON.stringify(leaf.subjectCN ?? leaf.subject)} is not a CA certificate (basicConstraints cA is not set)`,
    );
  }
  return { caBundle: Buffer.from(cas.map((c) => c.pem).join(''), 'utf8').toString('base64'), cas };
}

/** Per webhook, in the order read: a `test` of its name at its index and an `add` (which also replaces) of caBundle. */
export function caBundlePatch(webhookNames: readonly string[], caBundle: string): JsonPatchOp[] {
  return webhookNames.flatMap((name, i) => [
    { op: 'test' as const, path: `/webhooks/${i}/name`, value: name },
    { op: 'add' as const, path: `/webhooks/${i}/clientConfig/caBundle`, value: caBundle },
  ]);
}

/**
 * Reads the configuration, asks `plan` for the operations it needs, and writes them, guarded as the file
 * comment says; a lost race is computed again, up to `attempts` times. Resolves with the view the written
 * (or empty) plan came from, or undefined when the configuration does not exist. Errors name it.
 */
export async function updateConfiguration(
  client: WebhookConfigurationClient,
  ref: WebhookConfigurationRef,
  plan: (view: WebhookConfigurationView) => JsonPatchOp[],
  attempts = 4,
): Promise<{ view: WebhookConfigurationView; ops: JsonPatchOp[] } | undefined> {
  const what = describeRef(ref);
  for (let attempt = 1; ; attempt++) {
    let view: WebhookConfigurationView;
    try {
      view = await client.read(ref);
    } catch (e) {
      if (errorStatus(e) === 404) return undefined;
      throw new Error(`${what}: cannot read: ${errorMessage(e)}`);
    }
    const ops = plan(view);
    if (ops.length === 0) return { view, ops };
    const rv = view.metadata?.resourceVersion;
    const guard: JsonPatchOp[] = rv ? [{ op: 'test', path: '/metadata/resourceVersion', value: rv }] : [];
    try {
      await client.patch(ref, [...guard, ...ops]);
      return { view, ops };
    } catch (e) {
      if (isConflict(e) && attempt < attempts) continue;
      if (errorStatus(e) === 404) throw new Error(`${what} was deleted while it was being written`);
      throw new Error(
        `${what}: cannot write${isConflict(e) ? `, changed by another writer ${attempts} times` : ''}: ${errorMessage(e)}`,
      );
    }
  }
}

export interface InjectResult {
  ref: WebhookConfigurationRef;
  /** Names of the webhooks whose caBundle was different and is now set. */
  changed: string[];
  /** Names of the webhooks that already had this caBundle. */
  unchanged: string[];
}

/** inject-ca: sets the caBundle of every webhook of one configuration; no write when all carry it already. */
export async function injectCABundle(
  client: WebhookConfigurationClient,
  ref: WebhookConfigurationRef,
  caBundle: string,
): Promise<InjectResult> {
  const result: InjectResult = { ref, changed: [], unchanged: [] };
  const done = await updateConfiguration(client, ref, (view) => {
    const webhooks = view.webhooks ?? [];
    result.changed = webhooks.filter((w) => w.clientConfig?.caBundle !== caBundle).map((w) => w.name);
    result.unchanged = webhooks.filter((w) => w.clientConfig?.caBundle === caBundle).map((w) => w.name);
    return result.changed.length === 0
      ? []
      : caBundlePatch(
          webhooks.map((w) => w.name),
          caBundle,
        );
  });
  if (!done) throw new Error(`${describeRef(ref)} not found`);
  return result;
}
