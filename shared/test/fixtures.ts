/**
 * Builders for the unit tests: apps, clusters, ConfigMaps, Secrets and pods shaped like what the API
 * server returns, and an in-memory World that answers both the admission Lookup (metadata only) and the
 * reconciler's World (content and pods) from plain maps.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { AppLookup, World } from '../src/domain/lookup.js';
import { secretDataMac } from '../src/configmeta/secret-data-mac.js';
import { configMetaVolume } from '../src/delivery/pod-delivery.js';
import { objectKey } from '../src/primitives/object-key.js';
import {
  API_VERSION,
  LABEL_CM_TYPE,
  LABEL_KDCLUSTER,
  LABEL_ROLE,
  LABEL_SECRET_TYPE,
  type ConfigMapLike,
  type Connections,
  type KDApp,
  type KDAppSpec,
  type KDCluster,
  type KDClusterSpec,
  type KDClusterStatus,
  type PodLike,
  type SecretLike,
} from '../src/domain/types.js';

export const NS = 'ml';
export const SYSTEM_NS = 'kd-system';
/** The digest key the fixtures' Secrets are MACed with (the reconciler's comes from a Secret). */
export const TEST_DIGEST_KEY = Buffer.alloc(32, 7);

/** A deterministic uid derived from a name (the API server would assign a random one). */
export function uidFor(kind: string, namespace: string, name: string): string {
  let h = 0x811c9dc5;
  for (const ch of `${kind}/${namespace}/${name}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  const hex = h.toString(16).padStart(8, '0');
  return `${hex}-0000-4000-8000-${hex}${hex.slice(0, 4)}`;
}

export function app(name: string, spec: Partial<KDAppSpec> = {}, namespace = NS): KDApp {
  return {
    apiVersion: API_VERSION,
    kind: 'KubeDirectorApp',
    metadata: { name, namespace, uid: uidFor('KubeDirectorApp', namespace, name), resourceVersion: '100' },
    spec: { label: { name }, configSchemaVersion: 8, ...spec },
  };
}

export interface ClusterOptions {
  namespace?: string;
  connections?: Connections;
  generator?: number;
  /** Ready members recorded in status (the admission rules read status.members.ready). */
  ready?: number;
  status?: KDClusterStatus;
  roles?: KDClusterSpec['roles'];
  appCatalog?: KDClusterSpec['appCatalog'];
  labels?: Record<string, string>;
  resourceVersion?: string;
}

export function cluster(name: string, appName: string, opts: ClusterOptions = {}): KDCluster {
  const namespace = opts.namespace ?? NS;
  const spec: KDClusterSpec = { app: appName };
  if (opts.appCatalog !== undefined) spec.appCatalog = opts.appCatalog;
  if (opts.roles !== undefined) spec.roles = opts.roles;
  if (opts.connections !== undefined) spec.connections = opts.connections;
  if (opts.generator !== undefined) spec.configMetaGenerator = opts.generator;
  const c: KDCluster = {
    apiVersion: API_VERSION,
    kind: 'KubeDirectorCluster',
    metadata: {
      name,
      namespace,
      uid: uidFor('KubeDirectorCluster', namespace, name),
      resourceVersion: opts.resourceVersion ?? '200',
      generation: 1,
      ...(opts.labels ? { labels: opts.labels } : {}),
    },
    spec,
  };
  if (opts.status) c.status = opts.status;
  else if (opts.ready !== undefined) c.status = { members: { total: opts.ready, ready: opts.ready, synced: 0 } };
  return c;
}

export interface ObjectOptions {
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  resourceVersion?: string;
}

/** A ConfigMap; `cmType` undefined leaves it unlabeled (not connectable). */
export function configMap(
  name: string,
  cmType: string | undefined,
  data: Record<string, string> | undefined,
  opts: ObjectOptions = {},
): ConfigMapLike {
  const namespace = opts.namespace ?? NS;
  const labels = { ...(opts.labels ?? {}), ...(cmType !== undefined ? { [LABEL_CM_TYPE]: cmType } : {}) };
  return {
    metadata: {
      name,
      namespace,
      uid: uidFor('ConfigMap', namespace, name),
      resourceVersion: opts.resourceVersion ?? '300',
      ...(Object.keys(labels).length > 0 ? { labels } : {}),
      ...(opts.annotations ? { annotations: opts.annotations } : {}),
    },
    ...(data ? { data } : {}),
  };
}

/**
 * A Secret as the reconciler keeps it: keys always, base64 values only when `withValues` (inlining).
 * `plain` holds the clear-text values; the builder base64-encodes them as the API server stores them.
 */
export function secret(
  name: string,
  secretType: string | undefined,
  plain: Record<string, string>,
  opts: ObjectOptions & { withValues?: boolean } = {},
): SecretLike {
  const namespace = opts.namespace ?? NS;
  const labels = {
    ...(opts.labels ?? {}),
    ...(secretType !== undefined ? { [LABEL_SECRET_TYPE]: secretType } : {}),
  };
  const uid = uidFor('Secret', namespace, name);
  const data = Object.fromEntries(Object.entries(plain).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
  return {
    metadata: {
      name,
      namespace,
      uid,
      resourceVersion: opts.resourceVersion ?? '400',
      ...(Object.keys(labels).length > 0 ? { labels } : {}),
      ...(opts.annotations ? { annotations: opts.annotations } : {}),
    },
    keys: Object.keys(plain),
    dataMac: secretDataMac(TEST_DIGEST_KEY, uid, data),
    ...(opts.withValues ? { data } : {}),
  };
}

export interface PodOptions {
  namespace?: string;
  ready?: boolean;
  /** status.phase; default Running. */
  phase?: string;
  hostname?: string;
  subdomain?: string;
  deleting?: boolean;
  annotations?: Record<string, string>;
  resourceVersion?: string;
  /** Leave out the configmeta volume the pod webhook adds (a pod created while the webhook was down). */
  withoutConfigMetaVolume?: boolean;
}

/**
 * A member pod of `clusterName` in role `role`, labelled the way KubeDirector labels its pods and with
 * the configmeta volume the pod webhook adds.
 */
export function pod(name: string, clusterName: string, role: string, opts: PodOptions = {}): PodLike {
  const namespace = opts.namespace ?? NS;
  return {
    metadata: {
      name,
      namespace,
      uid: uidFor('Pod', namespace, name),
      resourceVersion: opts.resourceVersion ?? '500',
      labels: { [LABEL_KDCLUSTER]: clusterName, [LABEL_ROLE]: role },
      ...(opts.annotations ? { annotations: opts.annotations } : {}),
      ...(opts.deleting ? { deletionTimestamp: '2024-01-01T00:00:00Z' } : {}),
    },
    spec: {
      ...(opts.hostname !== undefined ? { hostname: opts.hostname } : {}),
      ...(opts.subdomain !== undefined ? { subdomain: opts.subdomain } : {}),
      containers: [{ name: 'app' }],
      ...(opts.withoutConfigMetaVolume ? {} : { volumes: [configMetaVolume()] }),
    },
    status: {
      phase: opts.phase ?? 'Running',
      conditions: [{ type: 'Ready', status: opts.ready === false ? 'False' : 'True' }],
    },
  };
}

/**
 * The rest of the cluster, in maps keyed "namespace/name". Implements the admission Lookup (and
 * AppLookup) and the reconciler's World; records every read so tests can see what was asked.
 */
export class MemoryWorld implements AppLookup, World {
  readonly apps = new Map<string, KDApp>();
  readonly clusters = new Map<string, KDCluster>();
  readonly configMaps = new Map<string, ConfigMapLike>();
  readonly secrets = new Map<string, SecretLike>();
  readonly pods = new Map<string, PodLike>();
  readonly reads: string[] = [];

  constructor(
    objects: {
      apps?: KDApp[];
      clusters?: KDCluster[];
      configMaps?: ConfigMapLike[];
      secrets?: SecretLike[];
      pods?: PodLike[];
    } = {},
  ) {
    for (const a of objects.apps ?? []) this.addApp(a);
    for (const c of objects.clusters ?? []) this.addCluster(c);
    for (const c of objects.configMaps ?? []) this.addConfigMap(c);
    for (const s of objects.secrets ?? []) this.addSecret(s);
    for (const p of objects.pods ?? []) this.addPod(p);
  }

  private static key(o: { metadata: { namespace?: string; name?: string } }): string {
    return objectKey(o.metadata.namespace, o.metadata.name);
  }
  addApp(a: KDApp): this {
    this.apps.set(MemoryWorld.key(a), a);
    return this;
  }
  addCluster(c: KDCluster): this {
    this.clusters.set(MemoryWorld.key(c), c);
    return this;
  }
  addConfigMap(c: ConfigMapLike): this {
    this.configMaps.set(MemoryWorld.key(c), c);
    return this;
  }
  addSecret(s: SecretLike): this {
    this.secrets.set(MemoryWorld.key(s), s);
    return this;
  }
  addPod(p: PodLike): this {
    this.pods.set(MemoryWorld.key(p), p);
    return this;
  }

  async getApp(namespace: string, name: string): Promise<KDApp | undefined> {
    this.reads.push(`KubeDirectorApp ${namespace}/${name}`);
    return this.apps.get(objectKey(namespace, name));
  }
  async getCluster(namespace: string, name: string): Promise<KDCluster | undefined> {
    this.reads.push(`KubeDirectorCluster ${namespace}/${name}`);
    return this.clusters.get(objectKey(namespace, name));
  }
  async getConfigMap(namespace: string, name: string): Promise<ConfigMapLike | undefined> {
    this.reads.push(`ConfigMap ${namespace}/${name}`);
    return this.configMaps.get(objectKey(namespace, name));
  }
  async getSecret(namespace: string, name: string): Promise<SecretLike | undefined> {
    this.reads.push(`Secret ${namespace}/${name}`);
    return this.secrets.get(objectKey(namespace, name));
  }
  async listClusters(namespace?: string): Promise<KDCluster[]> {
    this.reads.push(`list KubeDirectorCluster ${namespace ?? '*'}`);
    return [...this.clusters.values()].filter((c) => namespace === undefined || c.metadata.namespace === namespace);
  }
  async podsOf(namespace: string, clusterName: string): Promise<PodLike[]> {
    return [...this.pods.values()].filter(
      (p) => p.metadata.namespace === namespace && p.metadata.labels?.[LABEL_KDCLUSTER] === clusterName,
    );
  }
}

/** The apps of examples/10-apps.yaml, parsed, placed in `namespace`. */
export function exampleApps(namespace = NS): KDApp[] {
  return exampleDocs('10-apps.yaml').map((d) => {
    const a = d as unknown as KDApp;
    return {
      ...a,
      metadata: { ...a.metadata, namespace, uid: uidFor('KubeDirectorApp', namespace, a.metadata.name!) },
    };
  });
}

/** The documents of one file under examples/ (repository root). */
export function exampleDocs(file: string): Record<string, unknown>[] {
  const path = fileURLToPath(new URL(`../../examples/${file}`, import.meta.url));
  return parseAllDocuments(readFileSync(path, 'utf8')).map((d) => d.toJSON() as Record<string, unknown>);
}

/** A small seeded PRNG (mulberry32), so property tests can shuffle from a fast-check integer seed. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A Fisher-Yates shuffle driven by a [0,1) generator. */
export function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
