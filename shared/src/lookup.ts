import type { KDApp, KDCluster, MetaObject } from './types.js';

/**
 * What the rules may ask about the rest of the cluster. The admission service answers from watch-fed
 * caches with a live read on a miss; unit tests answer from plain maps.
 */
export interface Lookup {
  getApp(namespace: string, name: string): Promise<KDApp | undefined>;
  getCluster(namespace: string, name: string): Promise<KDCluster | undefined>;
  /** Metadata is enough: rules only look at labels. */
  getConfigMap(namespace: string, name: string): Promise<MetaObject | undefined>;
  getSecret(namespace: string, name: string): Promise<MetaObject | undefined>;
}

export interface RuleOptions {
  /** Namespace of the system app catalog (appCatalog: system). */
  systemNamespace: string;
  /** When false, Secret connections are refused (the installation does not read Secrets). Default true. */
  secretConnections?: boolean;
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
