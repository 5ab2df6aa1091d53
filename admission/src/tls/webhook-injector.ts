/**
 * The one place that writes the webhook configurations in dynamic-serving mode: each webhook's caBundle
 * (bundle-merge.ts in certs has the rule) and its path behind the current token (path-token/path-token-rules.ts), in one
 * JSON Patch per configuration. Each write is computed from a fresh read and carries a `test` of the
 * resourceVersion and of every webhook's name (updateConfiguration in certs), so two replicas writing at
 * once never overwrite each other: the later write fails and is recomputed from what the earlier one left.
 */
import {
  caBundlePatch,
  certificatesIn,
  describeRef,
  mergeBundle,
  trackUnwanted,
  updateConfiguration,
  type BundleMerge,
  type CertificateInfo,
  type WebhookConfigurationClient,
  type WebhookConfigurationRef,
} from '@kd-connections/certs';
import { errorMessage, type Logger } from '@kd-connections/shared/runtime';
import { webhookPathPatch, type PathPatch } from '../path-token/path-token-rules.js';

/** How long a CA stays published after the Secret stopped wanting it (see bundle-merge.ts in certs). */
export const PRUNE_AFTER_MS = 20_000;

export interface Wanted {
  trusted: readonly CertificateInfo[];
  /** Only from a healthy Secret: a broken one says nothing reliable about which CAs are unwanted. */
  allowPrune: boolean;
  /** Paths: behind `token` (bare when undefined); a path behind one of `keep` is left as it is. Absent: paths left alone. */
  paths?: { token: string | undefined; keep: readonly string[] };
}

export interface InjectResult {
  ref: WebhookConfigurationRef;
  /** False when the configuration does not exist (nothing to keep trusted there). */
  exists: boolean;
  /** The CAs its caBundle carries after this call. */
  cas: CertificateInfo[];
  /** CAs this call added. */
  added: string[];
  error?: string;
}

export class WebhookInjector {
  private unwanted = new Map<string, number>();

  constructor(
    private readonly client: WebhookConfigurationClient,
    readonly refs: readonly WebhookConfigurationRef[],
    private readonly routeOf: (webhookName: string) => string | undefined,
    private readonly o: { log: Logger; now: () => Date; pruneAfterMs?: number },
  ) {}

  /** The next moment an unwanted CA may leave a bundle. */
  pruneDueAt(): Date | undefined {
    const times = [...this.unwanted.values()].map((t) => t + (this.o.pruneAfterMs ?? PRUNE_AFTER_MS));
    return times.length > 0 ? new Date(Math.min(...times)) : undefined;
  }

  /** Every CA some webhook's caBundle carries now (configurations that cannot be read are left out). */
  async publishedCAs(): Promise<CertificateInfo[]> {
    const pems: string[] = [];
    for (const ref of this.refs) {
      const view = await this.client.read(ref).catch(() => undefined);
      for (const w of view?.webhooks ?? [])
        if (w.clientConfig?.caBundle) pems.push(Buffer.from(w.clientConfig.caBundle, 'base64').toString('utf8'));
    }
    return certificatesIn(...pems);
  }

  async inject(wanted: Wanted): Promise<InjectResult[]> {
    const results: InjectResult[] = [];
    const published: CertificateInfo[] = [];
    for (const ref of this.refs) {
      const r = await this.injectOne(ref, wanted);
      results.push(r);
      published.push(...r.cas);
    }
    if (wanted.allowPrune && results.every((r) => !r.error))
      this.unwanted = trackUnwanted(this.unwanted, published, wanted.trusted, this.o.now().getTime());
    return results;
  }

  private async injectOne(ref: WebhookConfigurationRef, wanted: Wanted): Promise<InjectResult> {
    const what = describeRef(ref);
    let merge: BundleMerge | undefined;
    let paths: PathPatch | undefined;
    let caChanged = false;
    let warned = false;
    // What every webhook trusts as last read (what a leaf may rely on); nothing while a read is under way.
    let inEvery: CertificateInfo[] = [];
    const client: WebhookConfigurationClient = {
      read: (r) => ((inEvery = []), this.client.read(r)),
      patch: (r, ops) => this.client.patch(r, ops),
    };
    let done;
    try {
      done = await updateConfiguration(client, ref, (view) => {
        const webhooks = view.webhooks ?? [];
        const bundles = webhooks.map((w) => w.clientConfig?.caBundle);
        const perWebhook = bundles.map((b) => certificatesIn(b ? Buffer.from(b, 'base64').toString('utf8') : ''));
        const published = certificatesIn(...perWebhook.flat().map((c) => c.pem));
        inEvery = published.filter((c) =>
          perWebhook.every((cas) => cas.some((x) => x.fingerprint256 === c.fingerprint256)),
        );
        merge = mergeBundle(published, wanted.trusted, {
          now: this.o.now(),
          unwantedSince: this.unwanted,
          pruneAfterMs: this.o.pruneAfterMs ?? PRUNE_AFTER_MS,
          allowPrune: wanted.allowPrune,
        });
        const caBundle = Buffer.from(merge.pem, 'utf8').toString('base64');
        // Never an empty bundle: the API server would fall back to the system roots.
        caChanged = merge.cas.length > 0 && bundles.some((b) => b !== caBundle);
        paths = wanted.paths && webhookPathPatch(view, wanted.paths.token, this.routeOf, wanted.paths.keep);
        if (paths?.unknown.length && !warned) {
          warned = true;
          this.o.log.warn('webhooks without a known route or with a path not ours keep it', {
            configuration: what,
            webhooks: paths.unknown,
          });
        }
        const names = webhooks.map((w) => w.name);
        return [...(caChanged ? caBundlePatch(names, caBundle) : []), ...(paths?.ops ?? [])];
      });
    } catch (e) {
      // An API error may quote a path; errors reach logs, events and /readyz. Every token-shaped segment goes.
      const error = errorMessage(e).replace(/\/t\/[A-Za-z0-9_-]{43}(?=\/|$)/g, '/t/<token>');
      return { ref, exists: true, cas: inEvery, added: [], error };
    }
    if (!done) return { ref, exists: false, cas: [], added: [] };
    if (done.ops.length === 0 || !merge) return { ref, exists: true, cas: inEvery, added: [] };
    // The token is never logged: the log is readable by more people than the configurations.
    this.o.log.info('webhook configuration updated', {
      configuration: what,
      cas: merge.cas.map((c) => c.fingerprint256.slice(0, 23)),
      added: caChanged ? merge.added.length : 0,
      removed: caChanged ? merge.removed.length : 0,
      paths: paths?.changed ?? [],
    });
    return { ref, exists: true, cas: caChanged ? merge.cas : inEvery, added: caChanged ? merge.added : [] };
  }
}
