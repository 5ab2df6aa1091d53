/**
 * The reconciler's view of the cluster: informers for kdclusters, kdapps, labelled ConfigMaps and
 * Secrets, member pods, and the per-cluster private Secrets it writes — all namespaces, or one
 * informer per watched namespace. Stored objects are trimmed by shared's trim-object (no managedFields;
 * pods keep only our two small annotations), which is what keeps 10,000 cached pods small.
 *
 * Labelled ConfigMaps and Secrets are watched as metadata only (PartialObjectMetadata) and kept as
 * identity and type label: any tenant can create them, as many and as big as its quota allows, and
 * their data never reaches this process unless a kdcluster connects to them. The content a reconcile
 * renders (data, labels, annotations; a Secret's values and their keyed MAC) is fetched then and kept,
 * bounded, while some kdcluster references the object (shared's ContentCache); a newer resourceVersion
 * on the watch drops the kept copy, and the next reconcile fetches it again. The private Secrets are
 * watched as metadata only too: their data never reaches this process but in the writes that set it;
 * their content MAC annotation says whether they are current. The Secrets informer starts once the MAC
 * key is loaded (digest-key.ts); until then the caches are not synced and the replica is not ready.
 */
import { CachedLookup, liveGet } from '@kd-connections/shared/caches';
import {
  keepConfigMap,
  keepSecret,
  slimObject,
  trimPod,
  typeLabelMeta,
  type CachedPod,
} from '@kd-connections/shared/configmeta';
import {
  KDAPP_PLURAL,
  KDCLUSTER_PLURAL,
  LABEL_CM_TYPE,
  LABEL_KDCLUSTER,
  LABEL_SECRET_TYPE,
  API_VERSION,
  type ConfigMapLike,
  type KDApp,
  type KDCluster,
  type MetaObject,
  type SecretLike,
  type World,
} from '@kd-connections/shared/domain';
import {
  LABEL_PRIVATE_CONFIGMETA_OF,
  trimPrivateSecret,
  type CachedPrivateSecret,
  type ReleasedRef,
} from '@kd-connections/shared/plan';
import { objectKey } from '@kd-connections/shared/primitives';
import {
  ACCEPT_JSON,
  ContentCache,
  NamespacedCache,
  errorMessage,
  Informer,
  type InformerOptions,
  type KubeClient,
  type KubeObject,
  type Logger,
} from '@kd-connections/shared/runtime';
import { loadDigestKey } from './digest-key.js';

export type { CachedPod } from '@kd-connections/shared/configmeta';

export interface CacheOptions {
  client: KubeClient;
  log: Logger;
  /** Namespaces to watch; empty = all. */
  namespaces: string[];
  systemNamespace: string;
  secretConnections: boolean;
  /** Namespace of the digest key Secret (the reconciler's own). */
  digestKeyNamespace: string;
  relistPeriodMs?: number;
  watchTimeoutSeconds?: number;
  onWatchRestart: (informer: string, reason: string) => void;
  /** Whether some kdcluster connects to the object (`namespace/name`): only then is its content kept. */
  referenced: (kind: 'ConfigMap' | 'Secret', key: string) => boolean;
  /** Bytes of content kept per kind. */
  contentCacheBytes: number;
  onContentFetch?: (kind: ContentKind, result: 'ok' | 'not_found' | 'error') => void;
}

export type ContentKind = 'configmap' | 'secret';

type LabelledMeta = MetaObject & KubeObject;

export const INDEX_PODS_BY_CLUSTER = 'cluster';
export const INDEX_CLUSTERS_BY_APP = 'app';

export class Caches {
  readonly clusters: NamespacedCache<KDCluster & KubeObject>;
  readonly apps: NamespacedCache<KDApp & KubeObject>;
  /** Labelled ConfigMaps and Secrets: identity and type label only. */
  readonly configMaps: NamespacedCache<LabelledMeta>;
  readonly secrets: NamespacedCache<LabelledMeta> | undefined;
  /** What connected ConfigMaps and Secrets render, for the ones some kdcluster references. */
  private readonly configMapContent: ContentCache<ConfigMapLike>;
  private readonly secretContent: ContentCache<SecretLike>;
  /** The private Secrets this reconciler writes (metadata only); only with Secret connections. */
  readonly privateSecrets: NamespacedCache<CachedPrivateSecret & KubeObject> | undefined;
  readonly pods: NamespacedCache<CachedPod & KubeObject>;
  private readonly all: NamespacedCache<KubeObject>[];
  private digestKey: Buffer | undefined;
  private stopped = false;
  private keyLoading: Promise<void> | undefined;
  private wakeKeyLoader: (() => void) | undefined;

  constructor(private readonly o: CacheOptions) {
    const make =
      <T extends KubeObject>(
        name: string,
        base: (ns: string | undefined) => string,
        extra: Partial<InformerOptions<T>>,
      ) =>
      (ns: string | undefined) =>
        new Informer<T>({
          name: ns ? `${name}/${ns}` : name,
          client: o.client,
          path: base(ns),
          log: o.log,
          relistPeriodMs: o.relistPeriodMs,
          watchTimeoutSeconds: o.watchTimeoutSeconds,
          onRestart: (reason) => o.onWatchRestart(name, reason),
          ...extra,
        });
    const core = (res: string) => (ns: string | undefined) =>
      ns ? `/api/v1/namespaces/${ns}/${res}` : `/api/v1/${res}`;
    const kd = (res: string) => (ns: string | undefined) =>
      ns ? `/apis/${API_VERSION}/namespaces/${ns}/${res}` : `/apis/${API_VERSION}/${res}`;
    const watched = o.namespaces.length ? o.namespaces : undefined;

    this.clusters = new NamespacedCache(
      watched,
      make('kdclusters', kd(KDCLUSTER_PLURAL), { transform: (x) => slimObject(x) as KDCluster & KubeObject }),
    );
    this.clusters.addIndex(INDEX_CLUSTERS_BY_APP, (c) => [
      `${c.metadata.namespace}/${c.spec?.app ?? ''}`,
      `*/${c.spec?.app ?? ''}`,
    ]);
    // Apps in the system catalog are needed whatever namespaces are watched.
    this.apps = new NamespacedCache(
      watched ? [...watched, o.systemNamespace] : undefined,
      make('kdapps', kd(KDAPP_PLURAL), { transform: (x) => slimObject(x) as KDApp & KubeObject }),
    );
    const labelled = (res: string, label: string) =>
      make<LabelledMeta>(res, core(res), {
        labelSelector: label,
        metadataOnly: true,
        transform: (x) => typeLabelMeta(x, label) as LabelledMeta,
      });
    this.configMaps = new NamespacedCache(watched, labelled('configmaps', LABEL_CM_TYPE));
    this.secrets = o.secretConnections
      ? new NamespacedCache(watched, labelled('secrets', LABEL_SECRET_TYPE))
      : undefined;
    const fetch = liveGet(o.client, 10_000);
    const content = <T>(kind: ContentKind, res: string, keep: (x: KubeObject) => { value: T; bytes: number }) =>
      new ContentCache<T>({
        kind,
        fetch: (ns, name) =>
          fetch<KubeObject>(
            `/api/v1/namespaces/${encodeURIComponent(ns)}/${res}/${encodeURIComponent(name)}`,
            ACCEPT_JSON,
          ),
        keep,
        wanted: (key) => o.referenced(kind === 'configmap' ? 'ConfigMap' : 'Secret', key),
        maxBytes: o.contentCacheBytes,
        onFetch: (result) => o.onContentFetch?.(kind, result),
      });
    this.configMapContent = content('configmap', 'configmaps', keepConfigMap);
    this.secretContent = content('secret', 'secrets', (x) => {
      if (!this.digestKey) throw new Error('Secret digest key not loaded');
      return keepSecret(x, { key: this.digestKey });
    });
    // A kept copy older than what the watch shows is dropped at once (the next reconcile fetches anew).
    for (const [cache, kept] of [
      [this.configMaps, this.configMapContent],
      [this.secrets, this.secretContent],
    ] as const) {
      const key = (x: KubeObject) => objectKey(x.metadata.namespace, x.metadata.name);
      cache?.on('update', (x) => kept.forget(key(x), x.metadata.resourceVersion));
      cache?.on('delete', (x) => kept.forget(key(x)));
    }
    this.privateSecrets = o.secretConnections
      ? new NamespacedCache(
          watched,
          make('private-secrets', core('secrets'), {
            labelSelector: LABEL_PRIVATE_CONFIGMETA_OF,
            metadataOnly: true,
            transform: (x) => trimPrivateSecret(x) as CachedPrivateSecret & KubeObject,
          }),
        )
      : undefined;
    this.pods = new NamespacedCache(
      watched,
      make('pods', core('pods'), {
        labelSelector: LABEL_KDCLUSTER,
        transform: (x) => trimPod(x) as CachedPod & KubeObject,
      }),
    );
    this.pods.addIndex(INDEX_PODS_BY_CLUSTER, (p) => [
      `${p.metadata.namespace}/${p.metadata.labels?.[LABEL_KDCLUSTER] ?? ''}`,
    ]);
    this.all = [
      this.clusters,
      this.apps,
      this.configMaps,
      this.pods,
      ...(this.secrets ? [this.secrets] : []),
      ...(this.privateSecrets ? [this.privateSecrets] : []),
    ] as NamespacedCache<KubeObject>[];
  }

  start(): void {
    for (const c of this.all) if (c !== this.secrets) c.start();
    if (this.secrets) this.keyLoading ??= this.startSecrets(this.secrets);
  }
  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeKeyLoader?.();
    await this.keyLoading;
    await Promise.all(this.all.map((c) => c.stop()));
  }

  /** Lets go of the content of an object no kdcluster connects to any more. */
  release(ref: ReleasedRef): void {
    if (ref.kind === 'ConfigMap') this.configMapContent.forget(ref.key);
    else if (ref.kind === 'Secret') this.secretContent.forget(ref.key);
  }

  /** Objects and bytes of connected content kept, per kind (for metrics). */
  contentStats(): { kind: ContentKind; objects: number; bytes: number }[] {
    return [
      { kind: 'configmap', objects: this.configMapContent.size, bytes: this.configMapContent.bytes },
      { kind: 'secret', objects: this.secretContent.size, bytes: this.secretContent.bytes },
    ];
  }

  /** Loads the digest key (retrying with backoff while it cannot be read or created), then watches Secrets. */
  private async startSecrets(secrets: NamespacedCache<LabelledMeta>): Promise<void> {
    for (let failures = 0; !this.stopped; failures++) {
      try {
        this.digestKey = await loadDigestKey(this.o.client, this.o.digestKeyNamespace, this.o.log);
        break;
      } catch (e) {
        const retryMs = Math.min(30_000, 500 * 2 ** failures);
        this.o.log.warn('cannot load the Secret digest key; Secret connections wait for it', {
          error: errorMessage(e),
          retryMs,
        });
        await new Promise<void>((r) => {
          const t = setTimeout(r, retryMs);
          this.wakeKeyLoader = () => (clearTimeout(t), r());
        });
      }
    }
    if (!this.stopped) secrets.start();
  }
  /** The digest key, once loaded (it also keys the private Secrets' content MAC). */
  get key(): Uint8Array | undefined {
    return this.digestKey;
  }

  get synced(): boolean {
    return this.all.every((c) => c.synced);
  }
  async waitForSync(timeoutMs = 120_000): Promise<void> {
    await Promise.all(this.all.map((c) => c.waitForSync(timeoutMs)));
  }

  /**
   * The World the shared rules and renderer read from. Apps and clusters come from the caches only; a
   * ConfigMap/Secret the label-selected cache does not hold may exist without the label, and one
   * metadata-only read tells "unlabeled" from "missing". Labelled but not cached yet (created a moment
   * ago): an error, so the key is retried once the watch catches up instead of reporting it missing.
   * A labelled one in the cache is rendered from its content (fetched when not kept at that version).
   */
  world(): World {
    const stores = {
      apps: this.apps,
      clusters: this.clusters,
      configmaps: this.configMaps,
      secrets: this.secrets,
    };
    const lookup = new CachedLookup<LabelledMeta, LabelledMeta>(stores, liveGet(this.o.client, 10_000), undefined, {
      cacheOnly: true,
      retryLabelledMiss: true,
    });
    // Labelled (so from the cache: a labelled live read throws above) → its content; else as read.
    const labelled = (m: MetaObject | undefined, label: string) => m?.metadata.labels?.[label] !== undefined;
    return {
      getApp: (ns, name) => lookup.getApp(ns, name),
      getCluster: (ns, name) => lookup.getCluster(ns, name),
      getConfigMap: async (ns, name) => {
        const m = await lookup.getConfigMap(ns, name);
        return m && labelled(m, LABEL_CM_TYPE) ? this.configMapContent.get(m) : m;
      },
      // Read live, an unlabeled Secret has no keys: it is never rendered.
      getSecret: async (ns, name) => {
        const m = await lookup.getSecret(ns, name);
        if (!m) return undefined;
        return labelled(m, LABEL_SECRET_TYPE) ? this.secretContent.get(m) : { ...m, keys: [] };
      },
      podsOf: async (ns, cluster) => this.pods.byIndex(INDEX_PODS_BY_CLUSTER, `${ns}/${cluster}`),
    };
  }
}
