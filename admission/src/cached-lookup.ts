/**
 * The rules' Lookup answered from watch-fed caches, with a live read on a miss: a cache only knows what
 * its watch has delivered, so an object created a moment ago (or a ConfigMap without the type label,
 * which the labelled cache never holds) is read from the API server before being called missing.
 * ConfigMaps and Secrets are read as metadata only and reduced to identity and labels, so no Secret
 * data (nor a last-applied annotation that quotes it) is ever kept.
 */
import {
  ACCEPT_JSON,
  ACCEPT_META,
  errorStatus,
  GROUP,
  KDAPP_PLURAL,
  KDCLUSTER_PLURAL,
  VERSION,
  type AppLookup,
  type KDApp,
  type KDCluster,
  type KubeClient,
  type MetaObject,
} from '@kd-connections/shared';

/** What a cache offers; shared's Informer satisfies it. */
export interface ObjectStore<T> {
  get(namespace: string | undefined, name: string): T | undefined;
  list(namespace?: string): T[];
}

export interface LookupStores {
  apps: ObjectStore<KDApp>;
  clusters: ObjectStore<KDCluster>;
  configmaps: ObjectStore<MetaObject>;
  /** Absent when Secret connections are disabled (Secrets are then never read). */
  secrets?: ObjectStore<MetaObject>;
}

/** A live GET; resolves undefined when the object does not exist (404). */
export type LiveGet = <T>(path: string, accept: string) => Promise<T | undefined>;

export type LookupKind = 'app' | 'cluster' | 'configmap' | 'secret';
export type LookupSource = 'cache' | 'live' | 'live_not_found';

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

/** Identity and labels only: what the rules read, and nothing that could hold Secret data. */
export function reduceMeta(obj: {
  apiVersion?: string;
  kind?: string;
  metadata?: Record<string, unknown>;
}): MetaObject {
  const m = obj.metadata ?? {};
  const metadata: MetaObject['metadata'] = {};
  for (const k of ['name', 'namespace', 'uid', 'resourceVersion'] as const) {
    if (typeof m[k] === 'string') metadata[k] = m[k];
  }
  if (m.labels && typeof m.labels === 'object') metadata.labels = { ...(m.labels as Record<string, string>) };
  if (m.deletionTimestamp !== undefined) metadata.deletionTimestamp = m.deletionTimestamp as string;
  return { metadata };
}

/** Drops what the rules never read and what costs memory: managedFields and the last-applied copy. */
export function slimObject<T extends { metadata?: Record<string, unknown> }>(obj: T): T {
  const m = obj.metadata;
  if (!m) return obj;
  const { managedFields: _mf, ...rest } = m;
  const annotations = rest.annotations as Record<string, string> | undefined;
  if (annotations && 'kubectl.kubernetes.io/last-applied-configuration' in annotations) {
    const { 'kubectl.kubernetes.io/last-applied-configuration': _la, ...keep } = annotations;
    rest.annotations = keep;
  }
  return { ...obj, metadata: rest };
}

const enc = encodeURIComponent;

/** A UTF-16 surrogate without its pair: no object name holds one, and encodeURIComponent throws on it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Kubernetes' rule for a name in a URL path (IsValidPathSegmentName), not empty, and valid Unicode. */
function pathSegment(s: unknown): boolean {
  return (
    typeof s === 'string' &&
    s !== '' &&
    s !== '.' &&
    s !== '..' &&
    !s.includes('/') &&
    !s.includes('%') &&
    !LONE_SURROGATE.test(s)
  );
}

export class CachedLookup implements AppLookup {
  constructor(
    private readonly stores: LookupStores,
    private readonly live: LiveGet,
    private readonly onLookup: (kind: LookupKind, source: LookupSource) => void = () => {},
  ) {}

  private async find<T>(
    kind: LookupKind,
    store: ObjectStore<T> | undefined,
    namespace: string,
    name: string,
    // Built only once the names passed the check: encodeURIComponent throws on a lone surrogate.
    path: (namespace: string, name: string) => string,
    accept: string,
    reduce: (o: T) => T,
  ): Promise<T | undefined> {
    // A name the API server cannot hold would make a different URL ("." and ".." are resolved away,
    // "%" is refused): such an object does not exist, and nothing is asked.
    if (!pathSegment(namespace) || !pathSegment(name)) return undefined;
    const cached = store?.get(namespace, name);
    if (cached) {
      this.onLookup(kind, 'cache');
      return cached;
    }
    const got = await this.live<T>(path(enc(namespace), enc(name)), accept);
    this.onLookup(kind, got ? 'live' : 'live_not_found');
    return got === undefined ? undefined : reduce(got);
  }

  getApp(namespace: string, name: string): Promise<KDApp | undefined> {
    const path = (ns: string, n: string) => `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${KDAPP_PLURAL}/${n}`;
    return this.find('app', this.stores.apps, namespace, name, path, ACCEPT_JSON, slimObject);
  }

  getCluster(namespace: string, name: string): Promise<KDCluster | undefined> {
    const path = (ns: string, n: string) => `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${KDCLUSTER_PLURAL}/${n}`;
    return this.find('cluster', this.stores.clusters, namespace, name, path, ACCEPT_JSON, slimObject);
  }

  getConfigMap(namespace: string, name: string): Promise<MetaObject | undefined> {
    const path = (ns: string, n: string) => `/api/v1/namespaces/${ns}/configmaps/${n}`;
    return this.find('configmap', this.stores.configmaps, namespace, name, path, ACCEPT_META, reduceMeta);
  }

  getSecret(namespace: string, name: string): Promise<MetaObject | undefined> {
    if (!this.stores.secrets) {
      // The rules refuse Secret connections before asking; never read a Secret in this mode.
      return Promise.resolve(undefined);
    }
    const path = (ns: string, n: string) => `/api/v1/namespaces/${ns}/secrets/${n}`;
    return this.find('secret', this.stores.secrets, namespace, name, path, ACCEPT_META, reduceMeta);
  }

  /** Sorted by namespace/name, so messages that list clusters read the same every time. */
  async listClusters(namespace?: string): Promise<KDCluster[]> {
    const key = (c: KDCluster) => `${c.metadata.namespace ?? ''}/${c.metadata.name ?? ''}`;
    return this.stores.clusters.list(namespace).sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  }
}
