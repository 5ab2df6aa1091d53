/** The shape of configmeta as KubeDirector's configmeta.go writes it, and what rendering it takes. */
import type { Member } from './members.js';
import type { ConfigMapLike, KDApp, KDCluster, SecretLike } from '../domain/types.js';

export interface RefKey {
  bdvlibrefkey: string[];
}

export interface ServiceEntry {
  qualifiers: string[];
  name: string;
  id: string;
  hostnames: RefKey;
  global_id: string;
  fqdns: RefKey;
  exported_service: string;
  /** null when the service has no endpoint port, as in KubeDirector. */
  endpoints: string[] | null;
  authToken: string;
}

export interface RoleEntry {
  services: Record<string, ServiceEntry>;
  node_ids: string[];
  hostnames: string[];
  fqdns: string[];
  fqdn_mappings: Record<string, string>;
  flavor: { storage: string; name: string; memory: string; description: string; cores: string };
  /** Only in the private document, only when the role has any (KubeDirector omits the key when empty). */
  secret_keys?: Record<string, string>;
}

export interface NodeEntry {
  role_id: string;
  nodegroup_id: string;
  id: string;
  hostname: string;
  fqdn: string;
  domain: string;
  distro_id: string;
  depends_on: Record<string, RefKey>;
  /** Only for members of a role with block storage (KubeDirector omits the key otherwise). */
  block_device_paths?: string[];
}

export interface ClusterSection {
  version: string;
  services: Record<string, Record<string, Record<string, RefKey>>>;
  nodegroups: Record<
    string,
    {
      roles: Record<string, RoleEntry>;
      distro_id: string;
      catalog_entry_version: string;
      config_metadata: Record<string, string> | null;
    }
  >;
  distros: Record<string, Record<string, RefKey>>;
  cluster: { name: string; isolated: boolean; id: string; config_metadata: Record<string, RefKey> };
}

export interface ConnectedObjectEntry {
  annotations: Record<string, string> | null;
  data: Record<string, string> | null;
  labels: Record<string, string>;
  metadata: { name: string };
  /** Secrets only: true when values were left out. */
  redacted?: boolean;
}

export interface EmbeddedCluster extends ClusterSection {
  node: null;
  connections: { clusters: null; configmaps: null; secrets: null };
}

export interface ConfigMetaConnections {
  clusters: Record<string, EmbeddedCluster>;
  configmaps: Record<string, ConnectedObjectEntry[]>;
  secrets: Record<string, ConnectedObjectEntry[]>;
}

export interface ConfigMeta extends ClusterSection {
  node: NodeEntry;
  connections: ConfigMetaConnections;
}

/** A connected cluster with what it takes to describe it. */
export interface ConnectedCluster {
  name: string;
  cluster: KDCluster;
  app: KDApp;
  members: Member[];
}

/** The connections that made it into configmeta (state Connected). */
export interface ConnectedObjects {
  clusters: ConnectedCluster[];
  configmaps: ConfigMapLike[];
  secrets: SecretLike[];
}

export interface RenderOptions {
  /** How a connected Secret is rendered: redacted (the public document) unless the private document says. */
  secretEntry?: (s: SecretLike) => ConnectedObjectEntry;
  /** Render connected clusters' role `secret_keys` (the private document only). */
  secretKeys?: boolean;
}
