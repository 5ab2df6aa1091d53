/**
 * The reconciler's view of the cluster: informers for kdclusters, kdapps, labelled ConfigMaps and
 * Secrets, and member pods — all namespaces, or one informer per watched namespace. Stored objects are
 * trimmed by shared's trim-object (no managedFields; pods keep only our two small annotations; Secrets
 * keep their keys, and values only when inlining is on), which is what keeps 10,000 cached pods small.
 */
import {
  CachedLookup,
  Informer,
  KDAPP_PLURAL,
  KDCLUSTER_PLURAL,
  LABEL_CM_TYPE,
  LABEL_KDCLUSTER,
  LABEL_SECRET_TYPE,
  API_VERSION,
  liveGet,
  slimObject,
  trimPod,
  trimSecret,
  type CachedPod,
  type ConfigMapLike,
  type Handler,
  type InformerEvent,
  type InformerOptions,
  type KDApp,
  type KDCluster,
  type KubeClient,
  type KubeObject,
  type Logger,
  type SecretLike,
  type World,
} from '@kd-connections/shared';

export type { CachedPod } from '@kd-connections/shared';

/** One informer per namespace (or one for all), behind a single get/list/index surface. */
export class NamespacedCache<T extends KubeObject> {
  private readonly informers = new Map<string, Informer<T>>();

  constructor(namespaces: string[] | undefined, make: (namespace: string | undefined) => Informer<T>) {
    if (!namespaces || namespaces.length === 0) this.informers.set('', make(undefined));
    else for (const ns of new Set(namespaces)) this.informers.set(ns, make(ns));
  }

  private informerFor(namespace: string): Informer<T> | undefined {
    return this.informers.get('') ?? this.informers.get(namespace);
  }

  on(event: InformerEvent, h: Handler<T>): this {
    for (const i of this.informers.values()) i.on(event, h);
    return this;
  }
  addIndex(name: string, fn: (o: T) => string[]): this {
    for (const i of this.informers.values()) i.addIndex(name, fn);
    return this;
  }
  get(namespace: string, name: string): T | undefined {
    return this.informerFor(namespace)?.get(namespace, name);
  }
  /** Whether `namespace` is watched at all (an unwatched object is unknown, not missing). */
  watches(namespace: string): boolean {
    return this.informerFor(namespace) !== undefined;
  }
  list(namespace?: string): T[] {
    if (namespace !== undefined) return this.informerFor(namespace)?.list(namespace) ?? [];
    return [...this.informers.values()].flatMap((i) => i.list());
  }
  byIndex(name: string, value: string): T[] {
    return [...this.informers.values()].flatMap((i) => i.byIndex(name, value));
  }
  get synced(): boolean {
    return [...this.informers.values()].every((i) => i.synced);
  }
  get size(): number {
    return [...this.informers.values()].reduce((n, i) => n + i.size, 0);
  }
  start(): void {
    for (const i of this.informers.values()) i.start();
  }
  async stop(): Promise<void> {
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
  }
  async waitForSync(timeoutMs: number): Promise<void> {
    await Promise.all([...this.informers.values()].map((i) => i.waitForSync(timeoutMs)));
  }
}

export interface CacheOptions {
  client: KubeClient;
  log: Logger;
  /** Namespaces to watch; empty = all. */
  namespaces: string[];
  systemNamespace: string;
  secretConnections: boolean;
  inlineSecretValues: boolean;
  relistPeriodMs?: number;
  watchTimeoutSeconds?: number;
  onWatchRestart: (informer: string, reason: string) => void;
}

export const INDEX_PODS_BY_CLUSTER = 'cluster';
export const INDEX_CLUSTERS_BY_APP = 'app';

export class Caches {
  readonly clusters: NamespacedCache<KDCluster & KubeObject>;
  readonly apps: NamespacedCache<KDApp & KubeObject>;
  readonly configMaps: NamespacedCache<ConfigMapLike & KubeObject>;
  readonly secrets: NamespacedCache<SecretLike & KubeObject> | undefined;
  readonly pods: NamespacedCache<CachedPod & KubeObject>;
  private readonly all: NamespacedCache<KubeObject>[];

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
    this.configMaps = new NamespacedCache(
      watched,
      make('configmaps', core('configmaps'), {
        labelSelector: LABEL_CM_TYPE,
        transform: (x) => slimObject(x) as ConfigMapLike & KubeObject,
      }),
    );
    this.secrets = o.secretConnections
      ? new NamespacedCache(
          watched,
          make('secrets', core('secrets'), {
            labelSelector: LABEL_SECRET_TYPE,
            transform: trimSecret(o.inlineSecretValues) as (x: KubeObject) => SecretLike & KubeObject,
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
    ] as NamespacedCache<KubeObject>[];
  }

  start(): void {
    for (const c of this.all) c.start();
  }
  async stop(): Promise<void> {
    await Promise.all(this.all.map((c) => c.stop()));
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
   */
  world(): World {
    const stores = {
      apps: this.apps,
      clusters: this.clusters,
      configmaps: this.configMaps,
      secrets: this.secrets,
    };
    const lookup = new CachedLookup<ConfigMapLike, SecretLike>(stores, liveGet(this.o.client, 10_000), undefined, {
      cacheOnly: true,
      retryLabelledMiss: true,
    });
    return {
      getApp: (ns, name) => lookup.getApp(ns, name),
      getCluster: (ns, name) => lookup.getCluster(ns, name),
      getConfigMap: (ns, name) => lookup.getConfigMap(ns, name),
      // Read live, an unlabeled Secret has no keys: it is never rendered.
      getSecret: async (ns, name) => {
        const s = await lookup.getSecret(ns, name);
        return s && ('keys' in s ? (s as SecretLike) : { ...s, keys: [] });
      },
      podsOf: async (ns, cluster) => this.pods.byIndex(INDEX_PODS_BY_CLUSTER, `${ns}/${cluster}`),
    };
  }
}
