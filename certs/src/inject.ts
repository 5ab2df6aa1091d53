/**
 * Publishing a CA in the caBundle of webhook configurations with a JSON Patch that touches nothing
 * else. Each patched webhook gets a `test` on its name at the index the patch addresses, so a
 * configuration reordered or renamed between our read and our write is refused as a whole (JSON
 * Patch is atomic) instead of putting the bundle on the wrong webhook.
 */
import { errorStatus, type KubeClient } from '@kd-connections/shared/runtime';
import { CertificateError, parseCertificates, type CertificateInfo } from './inspect.js';

export type WebhookConfigurationKind = 'validating' | 'mutating';

export interface WebhookConfigurationRef {
  kind: WebhookConfigurationKind;
  name: string;
}

export type JsonPatchOp = { op: 'test' | 'add'; path: string; value: unknown };

/** The part of a webhook configuration inject-ca (and the path-token publisher) reads. */
export interface WebhookConfigurationView {
  metadata?: { name?: string; resourceVersion?: string };
  webhooks?: {
    name: string;
    clientConfig?: { caBundle?: string; url?: string; service?: { name?: string; namespace?: string; path?: string } };
  }[];
}

/** The two API calls inject-ca makes; an interface so the bootstrap and tests can supply their own. */
export interface WebhookConfigurationClient {
  read(ref: WebhookConfigurationRef): Promise<WebhookConfigurationView>;
  patch(ref: WebhookConfigurationRef, ops: JsonPatchOp[]): Promise<WebhookConfigurationView>;
}

export function describeRef(ref: WebhookConfigurationRef): string {
  return `${ref.kind === 'validating' ? 'ValidatingWebhookConfiguration' : 'MutatingWebhookConfiguration'} ${ref.name}`;
}

/**
 * The caBundle field value (base64 of the PEM) for a CA file's content. Refuses anything that is
 * not a list of CA certificates: a private key or a serving certificate passed by mistake must not
 * be published.
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

/**
 * The JSON Patch setting caBundle on every webhook, given the names in the order they were read:
 * per webhook one `test` of its name at that index and one `add` (which also replaces) of the field.
 */
export function caBundlePatch(webhookNames: readonly string[], caBundle: string): JsonPatchOp[] {
  return webhookNames.flatMap((name, i) => [
    { op: 'test' as const, path: `/webhooks/${i}/name`, value: name },
    { op: 'add' as const, path: `/webhooks/${i}/clientConfig/caBundle`, value: caBundle },
  ]);
}

export interface InjectResult {
  ref: WebhookConfigurationRef;
  /** Names of the webhooks whose caBundle was different and is now set. */
  changed: string[];
  /** Names of the webhooks that already had this caBundle. */
  unchanged: string[];
}

const statusCode = errorStatus;

/** The API server's Status message when there is one (client-node's own message is a multi-line dump). */
function apiMessage(e: unknown): string {
  const body = (e as { body?: unknown }).body;
  try {
    const status = (typeof body === 'string' ? JSON.parse(body) : body) as { message?: unknown } | undefined;
    if (typeof status?.message === 'string') return `${status.message} (HTTP ${statusCode(e) ?? '?'})`;
  } catch {
    /* not JSON: fall through */
  }
  return ((e as Error).message ?? String(e)).split('\n')[0]!;
}

/**
 * Sets the caBundle of every webhook of one configuration. Skips the write when all already carry
 * it. Errors name the configuration: not found, changed concurrently (test failed), other API errors.
 */
export async function injectCABundle(
  client: WebhookConfigurationClient,
  ref: WebhookConfigurationRef,
  caBundle: string,
): Promise<InjectResult> {
  const what = describeRef(ref);
  let current: WebhookConfigurationView;
  try {
    current = await client.read(ref);
  } catch (e) {
    if (statusCode(e) === 404) throw new Error(`${what} not found`);
    throw new Error(`${what}: cannot read: ${apiMessage(e)}`);
  }
  const webhooks = current.webhooks ?? [];
  const result: InjectResult = { ref, changed: [], unchanged: [] };
  for (const w of webhooks) (w.clientConfig?.caBundle === caBundle ? result.unchanged : result.changed).push(w.name);
  if (result.changed.length === 0) return result;
  try {
    await client.patch(
      ref,
      caBundlePatch(
        webhooks.map((w) => w.name),
        caBundle,
      ),
    );
  } catch (e) {
    // A failed `test` comes back as a bare 422 Invalid; a fresh read tells it apart from other errors.
    if (statusCode(e) === 422) {
      const now = await client.read(ref).then(
        (c) => (c.webhooks ?? []).map((w) => w.name),
        () => undefined,
      );
      const before = webhooks.map((w) => w.name);
      if (now === undefined || now.join('\n') !== before.join('\n')) {
        throw new Error(
          `${what} changed while its caBundle was being set: webhooks were [${before.join(', ')}] when read, ` +
            `${now === undefined ? 'and it can no longer be read' : `now [${now.join(', ')}]`}; ` +
            'nothing was patched (the patch tests each name at its index), run inject-ca again',
        );
      }
    }
    if (statusCode(e) === 404) throw new Error(`${what} was deleted while its caBundle was being set`);
    throw new Error(`${what}: patch failed: ${apiMessage(e)}`);
  }
  return result;
}

function configurationPath(ref: WebhookConfigurationRef): string {
  return `/apis/admissionregistration.k8s.io/v1/${ref.kind}webhookconfigurations/${encodeURIComponent(ref.name)}`;
}

/**
 * A WebhookConfigurationClient on the project's one Kubernetes client (its user agent names the
 * caller; JSON Patch is sent as such). Used by inject-ca and by the admission service's bootstrap.
 */
export function webhookConfigurationClient(client: KubeClient): WebhookConfigurationClient {
  return {
    read: (ref) => client.get<WebhookConfigurationView>(configurationPath(ref)),
    patch: (ref, ops) => client.jsonPatch<WebhookConfigurationView>(configurationPath(ref), ops),
  };
}
