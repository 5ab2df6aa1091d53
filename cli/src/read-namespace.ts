/**
 * What the plugin reads, with the user's own credentials and nothing else: the kdclusters of one namespace
 * and the kdapps there and in the system catalog (whole: they hold no secret); of ConfigMaps and Secrets
 * only names, as server-side Tables without objects, once unfiltered and once selected by the type label —
 * metadata would carry annotations, and kubectl's last-applied-configuration copy holds the data, Secret
 * values included; member pods as metadata (labels and the generator annotation). A list the user may not
 * read (403), or a kind whose CRD is not installed (404), is recorded as unreadable with the API server's
 * words; anything else fails.
 */
import {
  GROUP,
  KDAPP_PLURAL,
  KDCLUSTER_PLURAL,
  LABEL_CM_TYPE,
  LABEL_KDCLUSTER,
  LABEL_SECRET_TYPE,
  VERSION,
  type KDApp,
  type KDCluster,
  type MetaObject,
  type PodLike,
} from '@kd-connections/shared/domain';
import { type NamespaceSnapshot } from '@kd-connections/shared/inspect';
import { ACCEPT_META_LIST, errorStatus, type KubeClient } from '@kd-connections/shared/runtime';

const PAGE = 500;
/** Rows of names without the objects: `kubectl get` without `-o`, as the API server renders it. */
const ACCEPT_TABLE = 'application/json;as=Table;g=meta.k8s.io;v=v1';

type Listed<T> = { items: T[] } | { unreadable: string };
type Page<T> = { items?: T[]; rows?: { cells?: unknown[] }[]; metadata?: { continue?: string } };

async function list<T>(
  client: KubeClient,
  path: string,
  query: Record<string, string> = {},
  accept?: string,
  take: (page: Page<T>) => T[] = (p) => p.items ?? [],
): Promise<Listed<T>> {
  const items: T[] = [];
  let cont: string | undefined;
  try {
    do {
      const page = await client.get<Page<T>>(path, {
        query: { ...query, limit: PAGE, continue: cont },
        ...(accept ? { accept } : {}),
      });
      items.push(...take(page));
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

const nsPath = (namespace: string) => `namespaces/${encodeURIComponent(namespace)}`;
const kdPath = (namespace: string, plural: string) => `/apis/${GROUP}/${VERSION}/${nsPath(namespace)}/${plural}`;

/** Names of a namespace's ConfigMaps or Secrets, each with `label` when it carries it (its value unknown: ''). */
async function labelledNames(client: KubeClient, path: string, label: string): Promise<Listed<MetaObject>> {
  const names = (p: Page<string>) => (p.rows ?? []).map((r) => String(r.cells?.[0] ?? ''));
  const query = { includeObject: 'None' };
  const [all, labelled] = await Promise.all([
    list<string>(client, path, query, ACCEPT_TABLE, names),
    list<string>(client, path, { ...query, labelSelector: label }, ACCEPT_TABLE, names),
  ]);
  if (!('items' in all)) return all;
  if (!('items' in labelled)) return labelled;
  const has = new Set(labelled.items);
  return {
    items: all.items.map((name) => ({ metadata: { name, ...(has.has(name) ? { labels: { [label]: '' } } : {}) } })),
  };
}

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
    labelledNames(client, `/api/v1/${nsPath(namespace)}/configmaps`, LABEL_CM_TYPE),
    labelledNames(client, `/api/v1/${nsPath(namespace)}/secrets`, LABEL_SECRET_TYPE),
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

/** One kdcluster (undefined: not found). */
export function readCluster(client: KubeClient, namespace: string, name: string): Promise<KDCluster | undefined> {
  return client.getIfExists<KDCluster>(`${kdPath(namespace, KDCLUSTER_PLURAL)}/${encodeURIComponent(name)}`);
}

/** The pods labelled as members of `cluster` (metadata: labels and the generator annotation). */
export async function readMemberPods(
  client: KubeClient,
  namespace: string,
  cluster: string,
): Promise<{ pods: PodLike[] } | { unreadable: string }> {
  const r = await list<PodLike>(
    client,
    `/api/v1/${nsPath(namespace)}/pods`,
    { labelSelector: `${LABEL_KDCLUSTER}=${cluster}` },
    ACCEPT_META_LIST,
  );
  return 'items' in r ? { pods: r.items } : r;
}
