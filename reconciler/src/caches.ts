/**
 * The reconciler's view of the cluster: informers for kdclusters, kdapps, labelled ConfigMaps and
 * Secrets, and member pods — all namespaces, or one informer per watched namespace. Stored objects are
 * trimmed to what rendering needs (no managedFields; pods keep only our two small annotations; Secrets
 * keep their keys, and values only when inlining is on), which is what keeps 10,000 cached pods small.
 */
import {
  ANNOTATION_CONFIGMETA,
  ANNOTATION_CONFIGMETA_GENERATOR,
  ANNOTATION_CONFIGMETA_HASH,
  ACCEPT_META,
  annotationsSize,
  errorStatus,
  Informer,
  secretDataHash,
  KDAPP_PLURAL,
  KDCLUSTER_PLURAL,
  LABEL_CM_TYPE,
  LABEL_KDCLUSTER,
  LABEL_SECRET_TYPE,
  API_VERSION,
  type ConfigMapLike,
  type Handler,
  type InformerEvent,
  type InformerOptions,
  type KDApp,
  type KDCluster,
  type KubeClient,
  type KubeObject,
  type Logger,
  type MetaObject,
  type PodLike,
  type SecretLike,
  type World,
} from '@kd-connections/shared';

const OUR_POD_ANNOTATIONS = [ANNOTATION_CONFIGMETA, ANNOTATION_CONFIGMETA_GENERATOR, ANNOTATION_CONFIGMETA_HASH];

/** A pod as cached: identity, labels, DNS fields, readiness, and our generator/hash annotations. */
export interface CachedPod extends PodLike {
  metadata: PodLike['metadata'] & {
    /** Bytes of the pod's annotations other than ours, for the annotation size limit. */
    otherAnnotationsBytes: number;
  };
}

function trimMeta(m: KubeObject['metadata']): Record<string, unknown> {
  const { managedFields: _mf, ...rest } = m as Record<string, unknown>;
  return rest;
}

export function trimPod(o: KubeObject): CachedPod {
  const p = o as unknown as PodLike;
  const ann = p.metadata.annotations;
  const ours = ann
    ? Object.fromEntries(
        OUR_POD_ANNOTATIONS.filter((k) => k !== ANNOTATION_CONFIGMETA && k in ann).map((k) => [k, ann[k]!]),
      )
    : undefined;
  const others = ann
    ? Object.fromEntries(Object.entries(ann).filter(([k]) => !OUR_POD_ANNOTATIONS.includes(k)))
    : undefined;
  return {
    metadata: {
      name: p.metadata.name,
      namespace: p.metadata.namespace,
      uid: p.metadata.uid,
      resourceVersion: p.metadata.resourceVersion,
      labels: p.metadata.labels,
      // Kept as a map (possibly empty) when the pod has any annotation: a patch must then add keys, not the map.
      annotations: ours,
      deletionTimestamp: p.metadata.deletionTimestamp,
      otherAnnotationsBytes: annotationsSize(others),
    },
    spec: { hostname: p.spec?.hostname, subdomain: p.spec?.subdomain },
    status: {
      phase: p.status?.phase,
      conditions: (p.status?.conditions ?? [])
        .filter((c) => c.type === 'Ready')
        .map((c) => ({ type: c.type, status: c.status })),
    },
  };
}

export function trimSecret(inlineValues: boolean): (o: KubeObject) => SecretLike {
  return (o) => {
    const s = o as unknown as { metadata: KubeObject['metadata']; data?: Record<string, string> };
    const data = s.data ?? {};
    return {
      metadata: trimMeta(s.metadata) as SecretLike['metadata'],
      keys: Object.keys(data).sort(),
      dataHash: secretDataHash(s.metadata.uid, data),
      ...(inlineValues ? { data: { ...data } } : {}),
    };
  };
}

function trimWhole<T>(o: KubeObject): T {
  return { ...o, metadata: trimMeta(o.metadata) } as T;
}

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
      make('kdclusters', kd(KDCLUSTER_PLURAL), { transform: (x) => trimWhole(x) }),
    );
    this.clusters.addIndex(INDEX_CLUSTERS_BY_APP, (c) => [
      `${c.metadata.namespace}/${c.spec?.app ?? ''}`,
      `*/${c.spec?.app ?? ''}`,
    ]);
    // Apps in the system catalog are needed whatever namespaces are watched.
    this.apps = new NamespacedCache(
      watched ? [...watched, o.systemNamespace] : undefined,
      make('kdapps', kd(KDAPP_PLURAL), { transform: (x) => trimWhole(x) }),
    );
    this.configMaps = new NamespacedCache(
      watched,
      make('configmaps', core('configmaps'), { labelSelector: LABEL_CM_TYPE, transform: (x) => trimWhole(x) }),
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
   * A ConfigMap/Secret the label-filtered cache does not hold may exist without the label. One
   * metadata-only read tells "unlabeled" from "missing" (only for connections that are not connected).
   */
  private async liveMeta(
    kind: 'configmaps' | 'secrets',
    namespace: string,
    name: string,
  ): Promise<MetaObject | undefined> {
    try {
      const m = await this.o.client.get<MetaObject>(`/api/v1/namespaces/${namespace}/${kind}/${name}`, {
        accept: ACCEPT_META,
      });
      return { metadata: { ...m.metadata, labels: m.metadata.labels ?? {} } };
    } catch (e) {
      if (errorStatus(e) === 404) return undefined;
      throw e;
    }
  }

  /**
   * Present but unlabeled: the metadata (no data is needed to say so). Absent: undefined. Labelled but
   * not cached yet (created a moment ago): an error, so the key is retried once the watch catches up
   * instead of reporting it missing.
   */
  private async unlabeledOrMissing(
    kind: 'configmaps' | 'secrets',
    ns: string,
    name: string,
    label: string,
  ): Promise<MetaObject | undefined> {
    const meta = await this.liveMeta(kind, ns, name);
    if (meta && meta.metadata.labels?.[label] !== undefined) {
      throw new Error(`${kind.slice(0, -1)} ${ns}/${name} is labelled but not in the cache yet; retrying`);
    }
    return meta;
  }

  /** The World the shared rules and renderer read from. */
  world(): World {
    return {
      getApp: async (ns, name) => this.apps.get(ns, name),
      getCluster: async (ns, name) => this.clusters.get(ns, name),
      getConfigMap: async (ns, name) => {
        const cm = this.configMaps.get(ns, name);
        if (cm || !this.configMaps.watches(ns)) return cm;
        return this.unlabeledOrMissing('configmaps', ns, name, LABEL_CM_TYPE);
      },
      getSecret: async (ns, name) => {
        if (!this.secrets) return undefined;
        const s = this.secrets.get(ns, name);
        if (s || !this.secrets.watches(ns)) return s;
        const meta = await this.unlabeledOrMissing('secrets', ns, name, LABEL_SECRET_TYPE);
        return meta && { ...meta, keys: [] };
      },
      podsOf: async (ns, cluster) => this.pods.byIndex(INDEX_PODS_BY_CLUSTER, `${ns}/${cluster}`),
    };
  }
}
