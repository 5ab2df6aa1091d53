/**
 * The private half of configmeta: what only root in a member pod may read. configcli, running as root,
 * merges `/etc/guestconfig/.platform.json` and then `.priv_configmeta.json` over the public document
 * with Python's `dict.update` — a shallow merge: a top-level key of the private file replaces that whole
 * key of the public document. So the private document carries whole top-level sections:
 * - `connections`, complete: the connected clusters and ConfigMaps as the public document has them (plus
 *   their roles' `secret_keys`), and the connected Secrets as KubeDirector renders them (values base64 as
 *   stored; name, every label and annotation value base64, as Go []byte) — except kubectl's
 *   last-applied copy, never copied;
 * - `nodegroups`, complete, when a role of the cluster itself has `secret_keys`;
 * - nothing else. KubeDirector itself writes neither file (its configmeta.json carries all of it); the
 *   split exists so values never reach the pod annotation the public document travels in.
 *
 * `.platform.json` must be a valid JSON object or configcli silently skips the private file. KubeDirector
 * has no platform file, and any key in it would become a top-level key of root's document, so it is `{}`.
 */
import { SPLICE_SECTIONS, type SpliceSection } from '../domain/guestconfig-layout.js';
import { isDroppedAnnotation } from './trim-object.js';
import type { Member } from './members.js';
import { goBytes, goMap } from './go-encoding.js';
import { renderClusterSection, renderConnections, roleSecretKeys } from './render-configmeta.js';
import {
  type ClusterSection,
  type ConfigMetaConnections,
  type ConnectedObjectEntry,
  type ConnectedObjects,
} from './configmeta-types.js';
import type { Connections, KDApp, KDCluster, SecretLike } from '../domain/types.js';

export interface PrivateConfigMeta {
  nodegroups?: ClusterSection['nodegroups'];
  connections?: ConfigMetaConnections;
}

/** The cluster itself, for its roles' `secret_keys`. */
export interface OwnCluster {
  cluster: KDCluster;
  app: KDApp;
  members: Member[];
}

/** The two files of the per-cluster private Secret, as the text the pod receives. */
export interface PrivateFiles {
  configmeta: string;
  platform: string;
  /**
   * Each top-level section of the private document as its own JSON text, for the sidecar to splice into
   * the public document (configmeta-splice.ts) in `document` mode.
   */
  sections: Partial<Record<SpliceSection, string>>;
}

/** What configcli needs beside the private file to merge it (and nothing it would show). */
export const PLATFORM_DOCUMENT = '{}';

const bytesMap = (m: Record<string, string>): Record<string, string> =>
  goMap(Object.entries(m).map(([k, v]) => [k, goBytes(v)]));

/** A connected Secret as KubeDirector's configmeta has it: data as stored (base64), the rest Go []byte. */
export function renderPrivateSecretEntry(s: SecretLike): ConnectedObjectEntry {
  const annotations = Object.entries(s.metadata.annotations ?? {}).filter(([k]) => !isDroppedAnnotation(k));
  return {
    annotations: bytesMap(Object.fromEntries(annotations)),
    data: s.data ? goMap(Object.entries(s.data)) : null,
    labels: bytesMap(s.metadata.labels ?? {}),
    metadata: { name: goBytes(s.metadata.name ?? '') },
  };
}

const hasSecretKeys = (cluster: KDCluster, members: Member[]) =>
  members.some((m) => roleSecretKeys(cluster, m.role) !== undefined);

/**
 * The private document of a cluster, or undefined when it has nothing private (no Secret connected, no
 * role secret keys): then no private Secret exists and root reads the public document alone. `order`
 * is the cluster's spec.connections, as for the public document.
 */
export function renderPrivateConfigMeta(
  connected: ConnectedObjects,
  order?: Connections,
  own?: OwnCluster,
): PrivateConfigMeta | undefined {
  const doc: PrivateConfigMeta = {};
  // Key order as in the public document: nodegroups before connections.
  if (own && hasSecretKeys(own.cluster, own.members))
    doc.nodegroups = renderClusterSection(own.cluster, own.app, own.members, { secretKeys: true }).nodegroups;
  if (connected.secrets.length > 0 || connected.clusters.some((c) => hasSecretKeys(c.cluster, c.members)))
    doc.connections = renderConnections(connected, { secretEntry: renderPrivateSecretEntry, secretKeys: true }, order);
  return Object.keys(doc).length > 0 ? doc : undefined;
}

export function renderPrivateFiles(
  connected: ConnectedObjects,
  order?: Connections,
  own?: OwnCluster,
): PrivateFiles | undefined {
  const doc = renderPrivateConfigMeta(connected, order, own);
  if (!doc) return undefined;
  const sections: PrivateFiles['sections'] = {};
  for (const k of SPLICE_SECTIONS) if (doc[k] !== undefined) sections[k] = JSON.stringify(doc[k]);
  return { configmeta: JSON.stringify(doc), platform: PLATFORM_DOCUMENT, sections };
}
