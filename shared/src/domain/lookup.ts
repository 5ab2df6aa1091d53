import type { ConfigMapLike, KDApp, KDCluster, MetaObject, PodLike, SecretLike } from './types.js';

/**
 * The one read port the connection rules, the classifier and the renderer read the rest of the cluster
 * through. The admission service answers from watch-fed caches with a live read on a miss (metadata is
 * enough there: the rules only look at labels); the reconciler answers with whole ConfigMaps and
 * Secrets (`World`); unit tests answer from plain maps.
 */
export interface Lookup<CM extends MetaObject = MetaObject, S extends MetaObject = MetaObject> {
  getApp(namespace: string, name: string): Promise<KDApp | undefined>;
  getCluster(namespace: string, name: string): Promise<KDCluster | undefined>;
  getConfigMap(namespace: string, name: string): Promise<CM | undefined>;
  getSecret(namespace: string, name: string): Promise<S | undefined>;
}

/** The admission service's Lookup also lists clusters (validating a kdapp asks who uses it). */
export interface AppLookup extends Lookup {
  /** Clusters in one namespace, or in all namespaces when namespace is undefined. */
  listClusters(namespace?: string): Promise<KDCluster[]>;
}

/** The reconciler's Lookup: whole ConfigMaps and Secrets (for rendering and hashing) and member pods. */
export interface World extends Lookup<ConfigMapLike, SecretLike> {
  /** Pods labelled as members of the cluster `clusterName` in `namespace`. */
  podsOf(namespace: string, clusterName: string): Promise<PodLike[]>;
}

export interface RuleOptions {
  /** Namespace of the system app catalog (appCatalog: system). */
  systemNamespace: string;
  /** When false, Secret connections are refused (the installation does not read Secrets). Default true. */
  secretConnections?: boolean;
  /** Next to KubeDirector, which delivers every connection in the spec (messages say so). Default false. */
  kubedirector?: boolean;
}

export interface ResolvedApp {
  app: KDApp;
  namespace: string;
}

/**
 * Finds a cluster's app the way KubeDirector's FindApp does: `local` in the cluster's namespace,
 * `system` in the system catalog, unset: local first, then the system catalog.
 */
export async function resolveApp(
  lookup: Pick<Lookup, 'getApp'>,
  clusterNamespace: string,
  spec: { app?: unknown; appCatalog?: unknown },
  systemNamespace: string,
): Promise<ResolvedApp | undefined> {
  if (typeof spec.app !== 'string' || spec.app === '') return undefined;
  const order =
    spec.appCatalog === 'local'
      ? [clusterNamespace]
      : spec.appCatalog === 'system'
        ? [systemNamespace]
        : [clusterNamespace, systemNamespace];
  for (const ns of order) {
    const app = await lookup.getApp(ns, spec.app);
    if (app) return { app, namespace: ns };
  }
  return undefined;
}

/** Where resolveApp looked, for "not found" messages. */
export function appSearchDescription(clusterNamespace: string, appCatalog: unknown, systemNamespace: string): string {
  if (appCatalog === 'local') return `in namespace "${clusterNamespace}" (appCatalog "local")`;
  if (appCatalog === 'system') return `in the system catalog (namespace "${systemNamespace}", appCatalog "system")`;
  return `in namespace "${clusterNamespace}" or in the system catalog (namespace "${systemNamespace}")`;
}
