/**
 * Keeps the caBundle of the webhook configurations current. Each write is computed from a fresh read
 * and sent with injectCABundle (one JSON Patch, a `test` of every webhook's name) plus a `test` of the
 * configuration's resourceVersion, so two replicas publishing at once never overwrite each other's CA:
 * the later write fails, and is recomputed from what the earlier one left.
 */
import {
  describeRef,
  injectCABundle,
  type CertificateInfo,
  type JsonPatchOp,
  type WebhookConfigurationClient,
  type WebhookConfigurationRef,
  type WebhookConfigurationView,
} from '@kd-connections/certs';
import { errorMessage, errorStatus, isConflict, type KubeClient } from '@kd-connections/shared';
import { publishedCAs, type BundleMerge } from './bootstrap-plan.js';

function configPath(ref: WebhookConfigurationRef): string {
  return `/apis/admissionregistration.k8s.io/v1/${ref.kind}webhookconfigurations/${encodeURIComponent(ref.name)}`;
}

/** A WebhookConfigurationClient on the shared KubeClient (its user agent); errors carry `code` as inject-ca expects. */
export function kubeWebhookClient(client: KubeClient): WebhookConfigurationClient {
  const withCode = (e: unknown): never => {
    throw Object.assign(e as Error, { code: errorStatus(e) });
  };
  return {
    read: (ref) => client.get<WebhookConfigurationView>(configPath(ref)).catch(withCode),
    patch: (ref, ops) => client.jsonPatch<WebhookConfigurationView>(configPath(ref), ops).catch(withCode),
  };
}

export interface PublishResult {
  ref: WebhookConfigurationRef;
  /** False when the configuration does not exist (nothing to keep trusted there). */
  exists: boolean;
  /** What the configuration carries after this call (as read, or as written). */
  cas: CertificateInfo[];
  changed: boolean;
  added: string[];
  removed: string[];
  /** Why the configuration could not be read or written. */
  error?: string;
}

const ATTEMPTS = 4;

export class CABundlePublisher {
  constructor(
    private readonly client: WebhookConfigurationClient,
    readonly refs: readonly WebhookConfigurationRef[],
  ) {}

  /** The CAs each configuration carries now; configurations that cannot be read are left out. */
  async read(): Promise<{ ref: WebhookConfigurationRef; cas: CertificateInfo[] }[]> {
    const out: { ref: WebhookConfigurationRef; cas: CertificateInfo[] }[] = [];
    for (const ref of this.refs) {
      try {
        out.push({ ref, cas: casOf(await this.client.read(ref)) });
      } catch {
        /* the publish that follows reports it */
      }
    }
    return out;
  }

  /**
   * For each configuration: read it, let `compute` decide the bundle from what it carries, write it
   * when it differs. A concurrent change is retried from a fresh read; other failures are returned.
   */
  async publish(compute: (published: CertificateInfo[]) => BundleMerge): Promise<PublishResult[]> {
    const results: PublishResult[] = [];
    for (const ref of this.refs) results.push(await this.publishOne(ref, compute));
    return results;
  }

  private async publishOne(
    ref: WebhookConfigurationRef,
    compute: (published: CertificateInfo[]) => BundleMerge,
  ): Promise<PublishResult> {
    const base = { ref, changed: false, added: [] as string[], removed: [] as string[] };
    for (let attempt = 1; ; attempt++) {
      let view: WebhookConfigurationView;
      try {
        view = await this.client.read(ref);
      } catch (e) {
        if (errorStatus(e) === 404) return { ...base, exists: false, cas: [] };
        return { ...base, exists: true, cas: [], error: `${describeRef(ref)}: cannot read: ${errorMessage(e)}` };
      }
      const published = casOf(view);
      const merge = compute(published);
      // Never publish an empty bundle: the API server would fall back to the system roots.
      if (merge.cas.length === 0) return { ...base, exists: true, cas: published };
      const caBundle = Buffer.from(merge.pem, 'utf8').toString('base64');
      let conflict = false;
      const rv = view.metadata?.resourceVersion;
      const guarded: WebhookConfigurationClient = {
        read: async () => view,
        patch: async (r, ops) => {
          const test: JsonPatchOp[] = rv ? [{ op: 'test', path: '/metadata/resourceVersion', value: rv }] : [];
          try {
            return await this.client.patch(r, [...test, ...ops]);
          } catch (e) {
            conflict = isConflict(e);
            throw e;
          }
        },
      };
      try {
        const r = await injectCABundle(guarded, ref, caBundle);
        const changed = r.changed.length > 0;
        return {
          ref,
          exists: true,
          cas: merge.cas,
          changed,
          added: changed ? merge.added : [],
          removed: changed ? merge.removed : [],
        };
      } catch (e) {
        if (conflict && attempt < ATTEMPTS) continue;
        return { ...base, exists: true, cas: published, error: errorMessage(e) };
      }
    }
  }
}

function casOf(view: WebhookConfigurationView): CertificateInfo[] {
  return publishedCAs((view.webhooks ?? []).map((w) => w.clientConfig?.caBundle));
}
