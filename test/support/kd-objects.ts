/** Builders for the objects cluster tests create: apps, clusters, labelled ConfigMaps/Secrets, member pods. */
import type { TestEnv } from './cluster.js';
import { decidePodDelivery } from '@kd-connections/shared/delivery';
import jsonpatch from 'fast-json-patch';

type Obj = Record<string, unknown>;

export function kdApp(
  name: string,
  spec: { category?: string; connectable_to?: Obj[]; version?: string; distroID?: string; roles?: string[] } = {},
): Obj {
  const roles = spec.roles ?? ['controller', 'worker'];
  return {
    apiVersion: 'kubedirector.hpe.com/v1beta1',
    kind: 'KubeDirectorApp',
    metadata: { name },
    spec: {
      label: { name: `${name} app` },
      distroID: spec.distroID ?? `test/${name}`,
      version: spec.version ?? '1.0',
      configSchemaVersion: 8,
      ...(spec.category ? { category: spec.category } : {}),
      ...(spec.connectable_to ? { connectable_to: spec.connectable_to } : {}),
      config: { roleServices: roles.map((r) => ({ roleID: r, serviceIDs: ['ui'] })), selectedRoles: roles },
      roles: roles.map((id) => ({ id, cardinality: '1+' })),
      services: [{ id: 'ui', label: { name: 'UI' }, endpoint: { port: 8080, urlScheme: 'http' } }],
    },
  };
}

export function kdCluster(
  name: string,
  app: string,
  connections: { clusters?: string[]; configmaps?: string[]; secrets?: string[] } = {},
  roles = ['controller'],
  members = 1,
): Obj {
  return {
    apiVersion: 'kubedirector.hpe.com/v1beta1',
    kind: 'KubeDirectorCluster',
    metadata: { name },
    spec: {
      app,
      roles: roles.map((id) => ({ id, members, resources: { limits: { cpu: '1', memory: '1Gi' } } })),
      ...(Object.keys(connections).length ? { connections } : {}),
    },
  };
}

export function configMap(name: string, data: Record<string, string>, cmType: string | undefined = 'model'): Obj {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, labels: cmType ? { 'kubedirector.hpe.com/cmType': cmType } : {} },
    data,
  };
}

export function secret(
  name: string,
  stringData: Record<string, string>,
  secretType: string | undefined = 'creds',
): Obj {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, labels: secretType ? { 'kubedirector.hpe.com/secretType': secretType } : {} },
    stringData,
  };
}

/**
 * A member pod. By default it carries what the pod webhook adds (decidePodDelivery's patch applied: the
 * kd-guestconfig sidecar, the seed init container, the volumes and the app's mount), so tests that run
 * without the webhook see a pod as it would be; `mutated: false` gives the pod as submitted (for tests of
 * the webhook itself, or of a pod it missed).
 */
export function memberPod(name: string, cluster: string, role = 'controller', opts: { mutated?: boolean } = {}): Obj {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { 'kubedirector.hpe.com/kdcluster': cluster, 'kubedirector.hpe.com/role': role } },
    spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
  };
  return opts.mutated === false ? pod : withDelivery(pod);
}

/** The pod as the pod webhook would mutate it (the same pure decision). */
export function withDelivery<T extends Obj>(pod: T): T {
  const d = decidePodDelivery(pod);
  return jsonpatch.applyPatch(structuredClone(pod), d.patch as jsonpatch.Operation[], true, false).newDocument;
}

/** kubectl apply of a list of objects into the test namespace (or `namespace`). */
export async function apply(env: TestEnv, objs: Obj[], namespace?: string): Promise<void> {
  const r = await env.kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objs }),
    namespace,
  });
  if (r.code !== 0) throw new Error(`kubectl apply failed: ${r.stderr}`);
}

export async function getJson<T = Record<string, any>>(env: TestEnv, args: string[], namespace?: string): Promise<T> {
  const r = await env.kubectl(['get', ...args, '-o', 'json'], { namespace });
  if (r.code !== 0) throw new Error(`kubectl get ${args.join(' ')} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

export async function kubectlOk(
  env: TestEnv,
  args: string[],
  opts: { input?: string; namespace?: string } = {},
): Promise<string> {
  const r = await env.kubectl(args, opts);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

/** The configmeta document a pod holds, parsed, with the generator annotation. */
export async function podConfigMeta(
  env: TestEnv,
  pod: string,
  namespace?: string,
): Promise<{ doc: any; generator: string; hash: string } | undefined> {
  const p = await getJson(env, ['pod', pod], namespace);
  const a = (p.metadata?.annotations ?? {}) as Record<string, string>;
  const text = a['kubedirector.hpe.com/configmeta'];
  if (!text) return undefined;
  return {
    doc: JSON.parse(text),
    generator: a['kubedirector.hpe.com/configmeta-generator'] ?? '',
    hash: a['kubedirector.hpe.com/configmeta-hash'] ?? '',
  };
}
