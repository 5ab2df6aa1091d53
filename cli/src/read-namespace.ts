/**
 * What the plugin reads, with the user's own credentials and nothing else: lists of one namespace (and the
 * system catalog's apps), ConfigMaps, Secrets and pods as metadata only (PartialObjectMetadata), so no
 * ConfigMap content or Secret value is ever fetched. A list the user may not read (403), or a kind whose
 * CRD is not installed (404), is recorded as unreadable with the API server's words; anything else fails.
 */
import {
  ACCEPT_META_LIST,
  errorStatus,
  GROUP,
  KDAPP_PLURAL,
  KDCLUSTER_PLURAL,
  LABEL_KDCLUSTER,
  VERSION,
  type KDApp,
  type KDCluster,
  type KubeClient,
  type MetaObject,
  type NamespaceSnapshot,
  type PodLike,
} from '@kd-connections/shared';

const PAGE = 500;

type Listed<T> = { items: T[] } | { unreadable: string };

async function list<T>(
  client: KubeClient,
  path: string,
  query: Record<string, string> = {},
  meta = false,
): Promise<Listed<T>> {
  const items: T[] = [];
  let cont: string | undefined;
  try {
    do {
      const page = await client.get<{ items?: T[]; metadata?: { continue?: string } }>(path, {
        query: { ...query, limit: PAGE, continue: cont },
        ...(meta ? { accept: ACCEPT_META_LIST } : {}),
      });
      items.push(...(page.items ?? []));
      cont = page.metadata?.continue || undefined;
    } while (cont);
  } catch (e) {
    const status = errorStatus(e);
    if (status === 403) return { unreadable: (e as Error).message };
    if (status === 404) return { unreadable: `${path} is not served (is the CRD installed?)` };
    throw e;
  }
  return { items };
}

const kdPath = (namespace: string, plural: string) => `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${plural}`;

export async function readNamespace(
  client: KubeClient,
  namespace: string,
  systemNamespace: string,
): Promise<NamespaceSnapshot> {
  const unreadable: NamespaceSnapshot['unreadable'] = {};
  const take = <T>(r: Listed<T>, kind: keyof NamespaceSnapshot['unreadable']): T[] => {
    if ('items' in r) return r.items;
    unreadable[kind] = unreadable[kind] ? `${unreadable[kind]}; ${r.unreadable}` : r.unreadable;
    return [];
  };
  const appNamespaces = [...new Set([namespace, systemNamespace])];
  const [clusters, configMaps, secrets, ...apps] = await Promise.all([
    list<KDCluster>(client, kdPath(namespace, KDCLUSTER_PLURAL)),
    list<MetaObject>(client, `/api/v1/namespaces/${namespace}/configmaps`, {}, true),
    list<MetaObject>(client, `/api/v1/namespaces/${namespace}/secrets`, {}, true),
    ...appNamespaces.map((ns) => list<KDApp>(client, kdPath(ns, KDAPP_PLURAL))),
  ]);
  return {
    namespace,
    clusters: take(clusters, 'clusters'),
    configMaps: take(configMaps, 'configmaps'),
    secrets: take(secrets, 'secrets'),
    apps: apps.flatMap((a) => take(a as Listed<KDApp>, 'apps')),
    unreadable,
  };
}

/** The pods labelled as members of `cluster` (metadata: labels and the generator annotation). */
export async function readMemberPods(
  client: KubeClient,
  namespace: string,
  cluster: string,
): Promise<{ pods: PodLike[] } | { unreadable: string }> {
  const r = await list<PodLike>(
    client,
    `/api/v1/namespaces/${namespace}/pods`,
    { labelSelector: `${LABEL_KDCLUSTER}=${cluster}` },
    true,
  );
  return 'items' in r ? { pods: r.items } : r;
}
