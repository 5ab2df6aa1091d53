/**
 * Keeps the caBundle of the webhook configurations current. Each write is computed from a fresh read
 * and sent with injectCABundle (one JSON Patch, a `test` of every webhook's name) plus a `test` of the
 * configuration's resourceVersion, so two replicas publishing at once never overwrite each other's CA:
 * the later write fails, and is recomputed from what the earlier one left.
 *
 * It also keeps the bookkeeping of which CAs may leave (mergeBundle has the rule): when each published
 * CA stopped being wanted, and CAs published for a Secret write that never happened.
 */
import {
  describeRef,
  forgetUnpublished,
  injectCABundle,
  mergeBundle,
  publishedCAs,
  trackUnwanted,
  type BundleMerge,
  type CertificateInfo,
  type JsonPatchOp,
  type WebhookConfigurationClient,
  type WebhookConfigurationRef,
  type WebhookConfigurationView,
} from '@kd-connections/certs';
import { errorMessage, errorStatus, isConflict, type Logger } from '@kd-connections/shared/runtime';

/** How long a CA stays published after it is no longer wanted; must exceed the propagation delay plus one Secret write. */
export const PRUNE_AFTER_MS = 20_000;

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

export interface PublisherOptions {
  pruneAfterMs?: number;
  now?: () => Date;
  /** Where each change and each missing configuration is logged. */
  log?: Logger;
  /** Called per publish for each configuration that does not exist (e.g. to record an Event). */
  onMissing?: (configuration: string) => void;
}

export class CABundlePublisher {
  private unwanted = new Map<string, number>();
  /** CAs this replica published for a Secret write that then failed. */
  private orphans = new Set<string>();
  readonly pruneAfterMs: number;
  private readonly now: () => Date;

  constructor(
    private readonly client: WebhookConfigurationClient,
    readonly refs: readonly WebhookConfigurationRef[],
    private readonly options: PublisherOptions = {},
  ) {
    this.pruneAfterMs = options.pruneAfterMs ?? PRUNE_AFTER_MS;
    this.now = options.now ?? (() => new Date());
  }

  /** When each published CA was first seen unwanted (epoch ms), for the next wake-up. */
  get unwantedSince(): ReadonlyMap<string, number> {
    return this.unwanted;
  }

  /** A CA published for a Secret write that did not happen signs nothing: the next publish takes it out. */
  withdraw(fingerprint256: string): void {
    this.orphans.add(fingerprint256);
  }

  /**
   * Publishes `desired` merged with what each configuration carries. `allowPrune` only from a healthy
   * Secret: a broken one says nothing reliable about which CAs are unwanted.
   */
  async publishDesired(desired: readonly CertificateInfo[], allowPrune: boolean): Promise<PublishResult[]> {
    const results = await this.publish((published) => {
      const now = this.now();
      if (allowPrune) this.unwanted = trackUnwanted(this.unwanted, published, desired, now.getTime());
      return mergeBundle(published, desired, {
        now,
        unwantedSince: this.unwanted,
        pruneAfterMs: this.pruneAfterMs,
        allowPrune,
        withdraw: this.orphans,
      });
    });
    if (results.every((r) => !r.error)) {
      const still = new Set(results.flatMap((r) => r.cas.map((c) => c.fingerprint256)));
      this.orphans = new Set([...this.orphans].filter((fp) => still.has(fp)));
    }
    if (allowPrune) {
      this.unwanted = forgetUnpublished(
        this.unwanted,
        results.flatMap((r) => r.cas),
      );
    }
    this.report(results);
    return results;
  }

  private report(results: readonly PublishResult[]): void {
    for (const r of results) {
      const what = `${r.ref.kind}/${r.ref.name}`;
      if (!r.exists) {
        this.options.log?.warn('webhook configuration not found; its caBundle is set once it exists', {
          configuration: what,
        });
        this.options.onMissing?.(what);
      } else if (r.changed) {
        this.options.log?.info('caBundle published', {
          configuration: what,
          cas: r.cas.map((c) => c.fingerprint256.slice(0, 23)),
          added: r.added.length,
          removed: r.removed.length,
        });
      }
    }
  }

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
