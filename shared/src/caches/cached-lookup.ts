/**
 * The Lookup answered from watch-fed caches, with a live read on a miss: a cache only knows what its
 * watch has delivered, so an object created a moment ago (or a ConfigMap without the type label, which
 * the label-selected cache never holds) is read from the API server before being called missing.
 * Live ConfigMaps and Secrets are read as metadata only and kept as identity and labels, so no Secret
 * data (nor a last-applied annotation that quotes it) is ever kept. Both services read through it: the
 * admission service as its Lookup, the reconciler for the ConfigMaps and Secrets it connects.
 */
import { GROUP, KDAPP_PLURAL, KDCLUSTER_PLURAL, LABEL_CM_TYPE, LABEL_SECRET_TYPE, VERSION } from '../domain/types.js';
import type { KDApp, KDCluster, MetaObject } from '../domain/types.js';
import type { AppLookup } from '../domain/lookup.js';
import { metaOnly, slimObject } from '../configmeta/trim-object.js';
import { DNS1123_LABEL_RE, invalidObjectName } from '../domain/names.js';
import { ACCEPT_JSON, ACCEPT_META, errorStatus, type KubeClient } from '../runtime/kube-client.js';

/** What a cache offers; shared's Informer satisfies it. */
export interface ObjectStore<T> {
  get(namespace: string | undefined, name: string): T | undefined;
  list(namespace?: string): T[];
  /** Whether `namespace` is watched at all (default: every namespace is). Unwatched means unknown, not missing. */
  watches?(namespace: string): boolean;
}

export interface LookupStores<CM extends MetaObject = MetaObject, S extends MetaObject = MetaObject> {
  apps: ObjectStore<KDApp>;
  clusters: ObjectStore<KDCluster>;
  configmaps: ObjectStore<CM>;
  /** Absent when Secret connections are disabled (Secrets are then never read). */
  secrets?: ObjectStore<S>;
}

/** A live GET; resolves undefined when the object does not exist (404). */
export type LiveGet = <T>(path: string, accept: string) => Promise<T | undefined>;

export type LookupKind = 'app' | 'cluster' | 'configmap' | 'secret';
export type LookupSource = 'cache' | 'live' | 'live_not_found';

export interface CachedLookupOptions {
  /**
   * Apps and clusters from the cache only (the reconciler: the watch event that brings one wakes the
   * cluster again). Default: read live on a miss.
   */
  cacheOnly?: boolean;
  /**
   * A live read that finds the type label on a ConfigMap/Secret the label-selected cache lacks means the
   * watch has not delivered it yet. Default: answer with its metadata (enough for the rules). When set:
   * throw, so a caller that needs the whole object retries once the cache holds it.
   */
  retryLabelledMiss?: boolean;
}

export function liveGet(client: KubeClient, timeoutMs = 3000): LiveGet {
  return async <T>(path: string, accept: string) => {
    try {
      return await client.get<T>(path, { accept, timeoutMs });
    } catch (e) {
      if (errorStatus(e) === 404) return undefined;
      throw e;
    }
  };
}

const enc = encodeURIComponent;

/**
 * Whether an object could be called this: namespaces are RFC 1123 labels and these kinds' names RFC 1123
 * subdomains (apimachinery's NameIsDNSSubdomain, which custom resources use too). Anything else does not
 * exist, and asking would only fail differently: "." and ".." are resolved away, "%" and "/" make another
 * URL, a lone surrogate cannot be encoded, and a megabyte-long name is a request line the server refuses.
 */
function couldExist(namespace: unknown, name: unknown): boolean {
  return typeof namespace === 'string' && DNS1123_LABEL_RE.test(namespace) && invalidObjectName(name) === undefined;
}

interface Kind {
  path: (namespace: string, name: string) => string;
  accept: string;
  trim: (o: never) => unknown;
  label?: string;
}

const KINDS: Record<LookupKind, Kind> = {
  app: {
    path: (ns, n) => `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${KDAPP_PLURAL}/${n}`,
    accept: ACCEPT_JSON,
    trim: slimObject,
  },
  cluster: {
    path: (ns, n) => `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${KDCLUSTER_PLURAL}/${n}`,
    accept: ACCEPT_JSON,
    trim: slimObject,
  },
  configmap: {
    path: (ns, n) => `/api/v1/namespaces/${ns}/configmaps/${n}`,
    accept: ACCEPT_META,
    trim: metaOnly,
    label: LABEL_CM_TYPE,
  },
  secret: {
    path: (ns, n) => `/api/v1/namespaces/${ns}/secrets/${n}`,
    accept: ACCEPT_META,
    trim: metaOnly,
    label: LABEL_SECRET_TYPE,
  },
};

export class CachedLookup<CM extends MetaObject = MetaObject, S extends MetaObject = MetaObject> implements AppLookup {
  constructor(
    private readonly stores: LookupStores<CM, S>,
    private readonly live: LiveGet,
    private readonly onLookup: (kind: LookupKind, source: LookupSource) => void = () => {},
    private readonly options: CachedLookupOptions = {},
  ) {}

  /** The cached object, else (unless the kind is cache-only) a live read; live ConfigMaps/Secrets are metadata only. */
  private async find<T>(
    kind: LookupKind,
    store: ObjectStore<T> | undefined,
    namespace: string,
    name: string,
  ): Promise<T | MetaObject | undefined> {
    if (!couldExist(namespace, name)) return undefined;
    const cached = store?.get(namespace, name);
    if (cached) {
      this.onLookup(kind, 'cache');
      return cached;
    }
    const k = KINDS[kind];
    if (store?.watches?.(namespace) === false) return undefined;
    if (this.options.cacheOnly && !k.label) return undefined;
    const got = await this.live<Record<string, unknown>>(k.path(enc(namespace), enc(name)), k.accept);
    this.onLookup(kind, got ? 'live' : 'live_not_found');
    if (got === undefined) return undefined;
    const trimmed = k.trim(got as never) as MetaObject;
    if (this.options.retryLabelledMiss && k.label && trimmed.metadata.labels?.[k.label] !== undefined) {
      throw new Error(`${kind} ${namespace}/${name} is labelled but not in the cache yet; retrying`);
    }
    return trimmed;
  }

  async getApp(namespace: string, name: string): Promise<KDApp | undefined> {
    return (await this.find('app', this.stores.apps, namespace, name)) as KDApp | undefined;
  }

  async getCluster(namespace: string, name: string): Promise<KDCluster | undefined> {
    return (await this.find('cluster', this.stores.clusters, namespace, name)) as KDCluster | undefined;
  }

  /** The cached object, or its metadata when read live (a ConfigMap the label-selected cache does not hold). */
  async getConfigMap(namespace: string, name: string): Promise<CM | MetaObject | undefined> {
    return this.find('configmap', this.stores.configmaps, namespace, name);
  }

  async getSecret(namespace: string, name: string): Promise<S | MetaObject | undefined> {
    // The rules refuse Secret connections before asking; never read a Secret in this mode.
    if (!this.stores.secrets) return undefined;
    return this.find('secret', this.stores.secrets, namespace, name);
  }

  /** Sorted by namespace/name, so messages that list clusters read the same every time. */
  async listClusters(namespace?: string): Promise<KDCluster[]> {
    const key = (c: KDCluster) => `${c.metadata.namespace ?? ''}/${c.metadata.name ?? ''}`;
    return this.stores.clusters.list(namespace).sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  }
}
