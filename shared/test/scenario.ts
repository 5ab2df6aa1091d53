/**
 * The configmeta scenario of the golden files (modelled on reference §2.5): in namespace "ml", the cluster
 * "notebook" (app jupyter-notebook of examples/) connects to the cluster "training" (app training-engine,
 * three members in two roles), the ConfigMap "model-prediction" and the Secret "scm-creds".
 */
import type { ResolvedApp } from '../src/domain/lookup.js';
import { membersOf, type Member } from '../src/configmeta/members.js';
import { renderConfigMetaForMembers, renderConnections } from '../src/configmeta/render-configmeta.js';
import { renderPrivateFiles, type PrivateFiles } from '../src/configmeta/render-private-configmeta.js';
import { resolveConnections, type ResolvedConnections } from '../src/plan/resolve-connections.js';
import type { KDApp, KDCluster } from '../src/domain/types.js';
import { MemoryWorld, NS, SYSTEM_NS, cluster, configMap, exampleApps, pod, secret } from './fixtures.js';

export const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';
export const SECRET_PLAIN = { username: 'alice', token: 's3cr3t' };

export interface Scenario {
  world: MemoryWorld;
  notebook: KDCluster;
  app: KDApp;
}

/** The Secret carries its values, as the reconciler's cache holds them (for the private document only). */
export function scenario(): Scenario {
  const apps = exampleApps();
  const notebook = cluster('notebook', 'jupyter-notebook', {
    connections: { clusters: ['training'], configmaps: ['model-prediction'], secrets: ['scm-creds'] },
    generator: 1,
    roles: [
      {
        id: 'controller',
        members: 1,
        resources: { requests: { cpu: '1', memory: '2Gi' }, limits: { cpu: '2', memory: '4Gi' } },
      },
    ],
  });
  notebook.metadata.uid = '6a0c6d4e-2c1f-4bd5-9d0e-6f1f2f7f0a11';
  const training = cluster('training', 'training-engine', {
    ready: 3,
    roles: [
      { id: 'RESTServer', members: 2, resources: { limits: { cpu: '1', memory: '4Gi' } } },
      { id: 'LoadBalancer', members: 1, resources: { limits: { cpu: '500m', memory: '2Gi' } } },
    ],
  });
  training.metadata.uid = '3f9d2a7c-5b1e-4c8a-9e21-7d4b6c0a1f55';
  const world = new MemoryWorld({
    apps,
    clusters: [notebook, training],
    configMaps: [
      configMap(
        'model-prediction',
        'model',
        { name: 'resnet50', path: '/models/resnet50/3', framework: 'tensorflow' },
        {
          annotations: {
            [LAST_APPLIED]: '{"apiVersion":"v1","kind":"ConfigMap","data":{"name":"resnet50"}}',
            'ml.example.com/owner': 'platform-team',
          },
        },
      ),
    ],
    secrets: [
      secret('scm-creds', 'source-control', SECRET_PLAIN, {
        withValues: true,
        annotations: {
          [LAST_APPLIED]: '{"apiVersion":"v1","kind":"Secret","stringData":{"username":"alice","token":"s3cr3t"}}',
        },
      }),
    ],
    pods: [
      pod('kdss-nb-0', 'notebook', 'controller', { hostname: 'kdss-nb-0', subdomain: 'kdhs-nb' }),
      // Listed out of order on purpose (one StatefulSet per role, as KubeDirector makes them); a terminating
      // pod beyond the seats is no member.
      pod('kdss-lb-0', 'training', 'LoadBalancer', { hostname: 'kdss-lb-0', subdomain: 'kdhs-tr' }),
      pod('kdss-tr-1', 'training', 'RESTServer', { hostname: 'kdss-tr-1', subdomain: 'kdhs-tr' }),
      pod('kdss-tr-0', 'training', 'RESTServer', { hostname: 'kdss-tr-0', subdomain: 'kdhs-tr' }),
      pod('kdss-tr-3', 'training', 'RESTServer', { hostname: 'kdss-tr-3', subdomain: 'kdhs-tr', deleting: true }),
    ],
  });
  const app = apps.find((a) => a.metadata.name === 'jupyter-notebook')!;
  return { world, notebook, app };
}

export interface Rendered {
  resolved: ResolvedConnections;
  members: Member[];
  /** pod name → configmeta JSON text */
  docs: Map<string, string>;
  /** The cluster's private files (root only in the pod). */
  private: PrivateFiles | undefined;
}

export async function render(s: Scenario): Promise<Rendered> {
  const ownApp: ResolvedApp = { app: s.app, namespace: NS };
  const resolved = await resolveConnections(s.notebook, ownApp, s.world, { systemNamespace: SYSTEM_NS });
  const members = membersOf(s.notebook, s.app, await s.world.podsOf(NS, 'notebook'));
  const docs = renderConfigMetaForMembers(
    s.notebook,
    s.app,
    members,
    renderConnections(resolved.connected, {}, s.notebook.spec.connections),
  );
  const own = { cluster: s.notebook, app: s.app, members };
  return { resolved, members, docs, private: renderPrivateFiles(resolved.connected, s.notebook.spec.connections, own) };
}
