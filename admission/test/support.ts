/**
 * Test helpers: AdmissionReview fixtures, and a world built from examples/ behind the real CachedLookup
 * (in-memory stores play the watch caches; a map of paths plays the API server for live reads).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { AdmissionReview } from '../src/admission-review.js';
import { CachedLookup, type LiveGet, type ObjectStore } from '@kd-connections/shared/caches';
import { type KDApp, type KDCluster, type MetaObject, type RuleOptions } from '@kd-connections/shared/domain';
import { objectKey } from '@kd-connections/shared/primitives';
import type { WebhookDeps } from '../src/webhook.js';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export const NS = 'ml';
export const SYSTEM_NS = 'kd-system';
const root = fileURLToPath(new URL('../../', import.meta.url));

export function fixture(name: string): AdmissionReview {
  return JSON.parse(readFileSync(`${root}admission/test/fixtures/${name}.json`, 'utf8')) as AdmissionReview;
}

function examples<T>(file: string, namespace = NS): T[] {
  return parseAllDocuments(readFileSync(`${root}examples/${file}`, 'utf8'))
    .map((d) => d.toJSON() as T & { metadata: { namespace?: string } })
    .filter(Boolean)
    .map((o) => ({ ...o, metadata: { ...o.metadata, namespace } }));
}

export class MapStore<T extends { metadata: { namespace?: string; name?: string } }> implements ObjectStore<T> {
  readonly items = new Map<string, T>();
  constructor(objs: T[] = []) {
    for (const o of objs) this.put(o);
  }
  put(o: T): void {
    this.items.set(objectKey(o.metadata.namespace, o.metadata.name), o);
  }
  get(namespace: string | undefined, name: string): T | undefined {
    return this.items.get(objectKey(namespace, name));
  }
  list(namespace?: string): T[] {
    return [...this.items.values()].filter((o) => namespace === undefined || o.metadata.namespace === namespace);
  }
}

export interface World {
  apps: MapStore<KDApp>;
  clusters: MapStore<KDCluster>;
  configmaps: MapStore<MetaObject>;
  secrets: MapStore<MetaObject>;
  /** What the fake API server answers to live GETs, by path. */
  server: Map<string, unknown>;
  liveCalls: { path: string; accept: string }[];
  lookups: string[];
  deps(rules?: Partial<RuleOptions>): WebhookDeps;
}

/**
 * The examples in namespace "ml": apps, clusters (training-cluster and spark-logs-nightly with ready
 * members), labelled ConfigMaps/Secret in the caches; an unlabelled ConfigMap and Secret exist only on
 * the "server" (a label-selected cache never holds them).
 */
export function exampleWorld(): World {
  const apps = new MapStore(examples<KDApp>('10-apps.yaml'));
  const clusters = new MapStore(
    examples<KDCluster>('40-clusters.yaml').map((c) =>
      ['training-cluster', 'spark-logs-nightly', 'kafka-events'].includes(c.metadata.name!)
        ? { ...c, status: { members: { total: 1, ready: 1, synced: 1 } } }
        : c,
    ),
  );
  const meta = (o: MetaObject): MetaObject => ({ metadata: { ...o.metadata } });
  const configmaps = new MapStore(examples<MetaObject>('20-configmaps.yaml').map(meta));
  const secrets = new MapStore(examples<MetaObject>('30-secrets.yaml').map(meta));
  const server = new Map<string, unknown>([
    [
      `/api/v1/namespaces/${NS}/configmaps/plain-cm`,
      { kind: 'PartialObjectMetadata', metadata: { name: 'plain-cm', namespace: NS, labels: { team: 'ml' } } },
    ],
    [
      `/api/v1/namespaces/${NS}/secrets/plain-secret`,
      {
        kind: 'PartialObjectMetadata',
        metadata: {
          name: 'plain-secret',
          namespace: NS,
          annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"data":{"password":"c2VjcmV0"}}' },
        },
      },
    ],
  ]);
  const liveCalls: { path: string; accept: string }[] = [];
  const lookups: string[] = [];
  const live: LiveGet = async <T>(path: string, accept: string) => {
    liveCalls.push({ path, accept });
    return server.get(path) as T | undefined;
  };
  return {
    apps,
    clusters,
    configmaps,
    secrets,
    server,
    liveCalls,
    lookups,
    deps: (rules = {}) => ({
      lookup: new CachedLookup({ apps, clusters, configmaps, secrets }, live, (kind, source) =>
        lookups.push(`${kind}:${source}`),
      ),
      rules: { systemNamespace: SYSTEM_NS, ...rules },
    }),
  };
}

export function decodePatch(patch: string | undefined): unknown {
  return patch === undefined ? undefined : JSON.parse(Buffer.from(patch, 'base64').toString('utf8'));
}

/** A request listener served on a loopback port, for tests of the HTTP edge; close() ends every connection. */
export async function serveOnLoopback(
  listener: http.RequestListener,
): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer(listener);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
