/**
 * Step 1 and 2 of a reconcile (DESIGN §5): resolve every connection to a state, keep the ones pods may
 * see (fail closed: forbidden or unlabeled objects are left out and reported), and hash what the pods
 * will see from them. The hash covers ConfigMap content, a connected cluster's own configmeta without
 * its connections, and for Secrets what configmeta shows of them plus a salted digest of their data
 * (SecretLike.dataHash) — never the values themselves. A metadata-only write to a Secret (a new
 * resourceVersion, the same data and labels) changes nothing.
 */
import { describeAllowed, describeApp, isConnectable } from './connectable.js';
import { connectionSets } from './connection-sets.js';
import { contentHash } from './hash.js';
import { appSearchDescription, resolveApp, type ResolvedApp } from './lookup.js';
import { membersOf, type MemberOptions } from './members.js';
import {
  renderConfigMapEntry,
  renderEmbeddedCluster,
  renderSecretEntry,
  type ConnectedCluster,
  type ConnectedObjects,
  type RenderOptions,
} from './render-configmeta.js';
import {
  LABEL_CM_TYPE,
  LABEL_SECRET_TYPE,
  type ConfigMapLike,
  type ConnectionKind,
  type ConnectionStatus,
  type KDApp,
  type KDCluster,
  type PodLike,
  type SecretLike,
} from './types.js';

/** Read access to current state (the reconciler's caches). */
export interface World {
  getApp(namespace: string, name: string): Promise<KDApp | undefined>;
  getCluster(namespace: string, name: string): Promise<KDCluster | undefined>;
  getConfigMap(namespace: string, name: string): Promise<ConfigMapLike | undefined>;
  getSecret(namespace: string, name: string): Promise<SecretLike | undefined>;
  /** Pods labelled as members of the cluster `clusterName` in `namespace`. */
  podsOf(namespace: string, clusterName: string): Promise<PodLike[]>;
}

export interface ResolveOptions extends MemberOptions, RenderOptions {
  systemNamespace: string;
  secretConnections?: boolean;
}

export interface ResolvedConnections {
  statuses: ConnectionStatus[];
  connected: ConnectedObjects;
  /** Hex sha256 over what pods see from the connected objects. */
  hash: string;
}

export async function resolveConnections(
  cluster: KDCluster,
  own: ResolvedApp | undefined,
  world: World,
  opts: ResolveOptions,
): Promise<ResolvedConnections> {
  const ns = cluster.metadata.namespace ?? '';
  const self = cluster.metadata.name ?? '';
  const sets = connectionSets(cluster.spec?.connections);
  const statuses: ConnectionStatus[] = [];
  const connected: ConnectedObjects = { clusters: [], configmaps: [], secrets: [] };
  const digests: Record<string, string> = {};
  const add = (
    kind: ConnectionKind,
    name: string,
    state: ConnectionStatus['state'],
    message?: string,
    digest?: string,
  ) => {
    statuses.push({
      kind,
      name,
      state,
      ...(message ? { message } : {}),
      ...(digest ? { contentHash: digest.slice(0, 16) } : {}),
    });
    if (digest) digests[`${kind}/${name}`] = digest;
  };

  for (const name of [...sets.clusters].sort()) {
    if (name === self) {
      add('Cluster', name, 'NotConnectable', 'a cluster cannot connect to itself');
      continue;
    }
    const target = await world.getCluster(ns, name);
    if (!target) {
      add('Cluster', name, 'Missing', `cluster "${name}" not found in namespace "${ns}"`);
      continue;
    }
    const targetApp = await resolveApp(world, ns, target.spec ?? {}, opts.systemNamespace);
    if (!targetApp) {
      add(
        'Cluster',
        name,
        'NotConnectable',
        `its app "${String(target.spec?.app)}" was not found ${appSearchDescription(ns, target.spec?.appCatalog, opts.systemNamespace)}`,
      );
      continue;
    }
    if (!own) {
      add(
        'Cluster',
        name,
        'NotConnectable',
        "this cluster's own app was not found, so connectable_to cannot be checked",
      );
      continue;
    }
    const verdict = isConnectable(own.app.spec, targetApp.app.spec);
    if (!verdict.allowed) {
      add(
        'Cluster',
        name,
        'NotConnectable',
        `${describeApp(targetApp.app)} is not allowed by connectable_to of app "${own.app.metadata.name}"; allowed: ${describeAllowed(own.app.spec)}`,
      );
      continue;
    }
    const c: ConnectedCluster = {
      name,
      cluster: target,
      app: targetApp.app,
      members: membersOf(target, targetApp.app, await world.podsOf(ns, name), opts),
    };
    connected.clusters.push(c);
    add('Cluster', name, 'Connected', undefined, contentHash(renderEmbeddedCluster(c)));
  }

  for (const name of [...sets.configmaps].sort()) {
    const cm = await world.getConfigMap(ns, name);
    if (!cm) add('ConfigMap', name, 'Missing', `configmap "${name}" not found in namespace "${ns}"`);
    else if (cm.metadata.labels?.[LABEL_CM_TYPE] === undefined)
      add('ConfigMap', name, 'Unlabeled', `configmap "${name}" lacks label ${LABEL_CM_TYPE}`);
    else {
      connected.configmaps.push(cm);
      add('ConfigMap', name, 'Connected', undefined, contentHash(renderConfigMapEntry(cm)));
    }
  }

  for (const name of [...sets.secrets].sort()) {
    if (opts.secretConnections === false) {
      add('Secret', name, 'NotConnectable', 'secret connections are disabled in this installation');
      continue;
    }
    const s = await world.getSecret(ns, name);
    if (!s) add('Secret', name, 'Missing', `secret "${name}" not found in namespace "${ns}"`);
    else if (s.metadata.labels?.[LABEL_SECRET_TYPE] === undefined)
      add('Secret', name, 'Unlabeled', `secret "${name}" lacks label ${LABEL_SECRET_TYPE}`);
    else {
      connected.secrets.push(s);
      const { uid } = s.metadata;
      add(
        'Secret',
        name,
        'Connected',
        undefined,
        contentHash({ entry: renderSecretEntry(s, {}), uid, dataHash: s.dataHash }),
      );
    }
  }

  return { statuses, connected, hash: contentHash(digests) };
}
