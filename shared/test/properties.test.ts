/**
 * Property tests (fast-check): the content hash is stable under key order and connection list order,
 * rendering is deterministic, and every patch builder's output, applied to the old object with an
 * independent RFC 6902 implementation (fast-json-patch), yields the intended object.
 */
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import jsonpatch from 'fast-json-patch';
import { isDeepStrictEqual } from 'node:util';
import { canonicalJson } from '../src/primitives/canonical-json.js';
import { decideGenerator } from '../src/domain/generator.js';
import { contentHash, sha256Hex, shortHash } from '../src/primitives/hash.js';
import {
  escapePointerSegment,
  pointer,
  sectionPatch,
  setAnnotationsPatch,
  testIdentity,
  type PatchOp,
} from '../src/primitives/json-patch.js';
import { membersOf } from '../src/configmeta/members.js';
import { CONFIGMETA_DIR, decidePodDelivery, type PodForMutation } from '../src/delivery/pod-delivery.js';
import { CONFIGMETA_VOLUME } from '../src/domain/guestconfig-layout.js';
import { renderConfigMetaForMembers, renderConnections } from '../src/configmeta/render-configmeta.js';
import { resolveConnections } from '../src/plan/resolve-connections.js';
import {
  ANNOTATION_CONFIGMETA,
  ANNOTATION_CONFIGMETA_GENERATOR,
  ANNOTATION_CONFIGMETA_VOLUME,
  LABEL_KDCLUSTER,
  type Connections,
  type KDCluster,
} from '../src/domain/types.js';
import {
  MemoryWorld,
  NS,
  SYSTEM_NS,
  cluster,
  configMap,
  exampleApps,
  pod,
  secret,
  seeded,
  shuffled,
} from './fixtures.js';

const RUNS = { numRuns: 200 };

/** Rebuilds a JSON value with every object's keys inserted in a shuffled order. */
function reorderKeys(value: unknown, random: () => number): unknown {
  if (Array.isArray(value)) return value.map((v) => reorderKeys(v, random));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = Object.create(null);
    for (const k of shuffled(Object.keys(value), random))
      out[k] = reorderKeys((value as Record<string, unknown>)[k], random);
    return out;
  }
  return value;
}

/** Applies with validation, so a failing `test` op or a bad path throws. */
function apply<T>(doc: T, patch: PatchOp[]): T {
  return jsonpatch.applyPatch(structuredClone(doc), patch as jsonpatch.Operation[], true, false).newDocument;
}

/** Keys that exercise RFC 6901 escaping: annotation-style keys with "/" and "~". */
const annotationKey = fc.oneof(
  fc.constantFrom(ANNOTATION_CONFIGMETA, ANNOTATION_CONFIGMETA_GENERATOR, 'a~b', 'x/~1y', '~0', '/', 'plain'),
  fc.string({ unit: fc.constantFrom('a', 'b', '/', '~', '0', '1', '.', '-'), minLength: 1, maxLength: 8 }),
);

describe('contentHash', () => {
  it('is 64 lowercase hex characters, and shortHash is its first 16', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(contentHash(v)).toMatch(/^[0-9a-f]{64}$/);
        expect(shortHash(v)).toBe(contentHash(v).slice(0, 16));
      }),
      RUNS,
    );
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  it('does not depend on object key order at any depth', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer(), (v, seed) => {
        const r = reorderKeys(v, seeded(seed));
        expect(canonicalJson(r)).toBe(canonicalJson(v));
        expect(contentHash(r)).toBe(contentHash(v));
      }),
      RUNS,
    );
  });

  it('changes when any value changes (no accidental collisions on small edits)', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue(), { minKeys: 1 }), fc.string(), (obj, extra) => {
        const k = Object.keys(obj)[0]!;
        const changed = { ...obj, [k]: { wrapped: obj[k], extra } };
        expect(contentHash(changed)).not.toBe(contentHash(obj));
      }),
      RUNS,
    );
    // Every key counts, including one named "__proto__" (a valid ConfigMap data key).
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), (key, a, b) => {
        fc.pre(a !== b);
        // A computed key defines an own property, even "__proto__".
        const doc = (v: string) => ({ data: { [key]: v } });
        expect(contentHash(doc(a))).not.toBe(contentHash(doc(b)));
      }),
      RUNS,
    );
    const proto = (v: string) => JSON.parse(`{"data":{"__proto__":${JSON.stringify(v)},"k":"v"}}`) as unknown;
    expect(contentHash(proto('one'))).not.toBe(contentHash(proto('two')));
    expect(canonicalJson(proto('one'))).toBe('{"data":{"__proto__":"one","k":"v"}}');
    // Array order is content: callers sort set-like lists themselves.
    expect(contentHash([1, 2])).not.toBe(contentHash([2, 1]));
    // undefined members are dropped, as JSON drops them.
    expect(contentHash({ a: 1, b: undefined })).toBe(contentHash({ a: 1 }));
  });
});

describe('resolveConnections: the hash and statuses do not depend on connection list order', () => {
  function world(): MemoryWorld {
    const apps = exampleApps();
    return new MemoryWorld({
      apps,
      clusters: [
        cluster('training', 'training-engine', { ready: 2, roles: [{ id: 'RESTServer', members: 2 }] }),
        cluster('spark', 'spark-streaming', { ready: 1 }),
        cluster('kafka', 'kafka'),
        cluster('orphan', 'no-such-app'),
      ],
      configMaps: [
        configMap('cm-a', 'model', { k: 'v' }),
        configMap('cm-b', 'spark-config', { x: 'y' }),
        configMap('cm-plain', undefined, { z: '1' }),
      ],
      secrets: [secret('s-a', 'db', { user: 'u' }), secret('s-plain', undefined, { p: 'q' })],
      pods: [
        pod('training-0', 'training', 'RESTServer'),
        pod('training-1', 'training', 'RESTServer'),
        pod('spark-0', 'spark', 'controller'),
      ],
    });
  }
  const [notebookApp] = exampleApps().filter((a) => a.metadata.name === 'jupyter-notebook');
  const names = {
    clusters: ['training', 'spark', 'kafka', 'orphan', 'ghost', 'nb'],
    configmaps: ['cm-a', 'cm-b', 'cm-plain', 'cm-ghost'],
    secrets: ['s-a', 's-plain', 's-ghost'],
  };
  const subset = (all: string[]) => fc.subarray(all);
  const conns = fc.record({
    clusters: subset(names.clusters),
    configmaps: subset(names.configmaps),
    secrets: subset(names.secrets),
  });

  it('same hash, statuses and connected objects for any permutation with repeats', async () => {
    await fc.assert(
      fc.asyncProperty(conns, fc.integer(), async (c, seed) => {
        const random = seeded(seed);
        const w = world();
        const own = { app: notebookApp!, namespace: NS };
        const permuted: Connections = {
          clusters: shuffled([...c.clusters, ...c.clusters], random),
          configmaps: shuffled(c.configmaps, random),
          secrets: shuffled([...c.secrets, ...c.secrets.slice(0, 1)], random),
        };
        const a = await resolveConnections(cluster('nb', 'jupyter-notebook', { connections: c }), own, w, {
          systemNamespace: SYSTEM_NS,
        });
        const b = await resolveConnections(cluster('nb', 'jupyter-notebook', { connections: permuted }), own, w, {
          systemNamespace: SYSTEM_NS,
        });
        expect(b.hash).toBe(a.hash);
        expect(b.statuses).toEqual(a.statuses);
        expect(renderConnections(b.connected)).toEqual(renderConnections(a.connected));
      }),
      { numRuns: 100 },
    );
  });

  it('different connected sets hash differently', async () => {
    const w = world();
    const own = { app: notebookApp!, namespace: NS };
    const hashOf = async (c: Connections) =>
      (
        await resolveConnections(cluster('nb', 'jupyter-notebook', { connections: c }), own, w, {
          systemNamespace: SYSTEM_NS,
        })
      ).hash;
    const seen = new Set<string>();
    for (const c of [
      {},
      { configmaps: ['cm-a'] },
      { configmaps: ['cm-b'] },
      { configmaps: ['cm-a', 'cm-b'] },
      { clusters: ['training'] },
      { secrets: ['s-a'] },
    ]) {
      seen.add(await hashOf(c));
    }
    expect(seen.size).toBe(6);
  });
});

describe('rendering is deterministic', () => {
  it('same bytes for the same state, whatever order pods and connected objects arrive in', async () => {
    const apps = exampleApps();
    const [nbApp] = apps.filter((a) => a.metadata.name === 'jupyter-notebook');
    const base = {
      apps,
      clusters: [
        cluster('training', 'training-engine', {
          roles: [
            { id: 'RESTServer', members: 3 },
            { id: 'LoadBalancer', members: 1 },
          ],
        }),
      ],
      configMaps: [
        configMap('cm-a', 'model', { k: 'v', a: 'b' }),
        configMap('cm-b', 'model', { x: 'y' }),
        configMap('cm-c', 'other', {}),
      ],
      secrets: [secret('s-a', 'db', { user: 'u', pass: 'p' }), secret('s-b', 'db', { t: 'x' })],
      pods: [
        pod('training-0', 'training', 'RESTServer'),
        pod('training-1', 'training', 'RESTServer'),
        pod('training-2', 'training', 'RESTServer'),
        pod('training-lb', 'training', 'LoadBalancer'),
        pod('nb-0', 'nb', 'controller'),
        pod('nb-1', 'nb', 'controller'),
      ],
    };
    const nb = cluster('nb', 'jupyter-notebook', {
      connections: { clusters: ['training'], configmaps: ['cm-a', 'cm-b', 'cm-c'], secrets: ['s-a', 's-b'] },
      roles: [{ id: 'controller', members: 2 }],
    });
    const renderWith = async (random: () => number) => {
      const w = new MemoryWorld({
        apps: base.apps,
        clusters: shuffled(base.clusters, random),
        configMaps: shuffled(base.configMaps, random),
        secrets: shuffled(base.secrets, random),
        pods: shuffled(base.pods, random),
      });
      const c: KDCluster = {
        ...nb,
        spec: {
          ...nb.spec,
          connections: {
            clusters: shuffled(nb.spec.connections!.clusters!, random),
            configmaps: shuffled(nb.spec.connections!.configmaps!, random),
            secrets: shuffled(nb.spec.connections!.secrets!, random),
          },
        },
      };
      const r = await resolveConnections(c, { app: nbApp!, namespace: NS }, w, { systemNamespace: SYSTEM_NS });
      const members = membersOf(c, nbApp, shuffled(await w.podsOf(NS, 'nb'), random));
      const conns = renderConnections({
        clusters: shuffled(r.connected.clusters, random),
        configmaps: shuffled(r.connected.configmaps, random),
        secrets: shuffled(r.connected.secrets, random),
      });
      return [...renderConfigMetaForMembers(c, nbApp!, members, conns).entries()];
    };
    const reference = await renderWith(seeded(1));
    expect(reference.map(([p]) => p)).toEqual(['nb-0', 'nb-1']);
    await fc.assert(
      fc.asyncProperty(fc.integer(), async (seed) => {
        expect(await renderWith(seeded(seed))).toEqual(reference);
      }),
      { numRuns: 50 },
    );
  });
});

describe('JSON Patch builders, applied with fast-json-patch', () => {
  const annotations = fc.dictionary(annotationKey, fc.string({ maxLength: 12 }), { maxKeys: 6 });
  const meta = fc.record({ uid: fc.uuid(), resourceVersion: fc.integer({ min: 1, max: 1e6 }).map(String) });

  it('escapePointerSegment round-trips keys with "/" and "~"', () => {
    fc.assert(
      // "__proto__" is not a possible annotation key and fast-json-patch refuses it by design.
      fc.property(
        annotationKey,
        fc.string().filter((x) => x !== '__proto__'),
        (k, s) => {
          for (const key of [k, s]) {
            const escaped = escapePointerSegment(key);
            expect(escaped).not.toMatch(/\//);
            expect(escaped).not.toMatch(/~(?![01])/);
            expect(jsonpatch.unescapePathComponent(escaped)).toBe(key);
            expect(jsonpatch.getValueByPointer({ a: { [key]: 42 } }, pointer('a', key))).toBe(42);
          }
        },
      ),
      RUNS,
    );
    expect(escapePointerSegment('kubedirector.hpe.com/configmeta')).toBe('kubedirector.hpe.com~1configmeta');
    expect(escapePointerSegment('~/')).toBe('~0~1');
    expect(escapePointerSegment('~1')).toBe('~01');
    expect(pointer('spec', 'containers', 0, 'volumeMounts', '-')).toBe('/spec/containers/0/volumeMounts/-');
  });

  it('setAnnotationsPatch yields the old annotations updated with the new values', () => {
    fc.assert(
      fc.property(
        meta,
        fc.option(annotations, { nil: undefined }),
        annotations,
        annotationKey,
        (m, current, values, guard) => {
          const pod = { metadata: { ...m, name: 'p', ...(current ? { annotations: current } : {}) }, spec: { x: 1 } };
          const patch = setAnnotationsPatch(pod.metadata, values, guard);
          const out = apply(pod, patch);
          expect(out.metadata.annotations ?? {}).toEqual({ ...(current ?? {}), ...values });
          expect(out.spec).toEqual(pod.spec);
          expect(out.metadata.uid).toBe(m.uid);
          // Guarded: pinned to the uid, and to the guard annotation's value or the resourceVersion.
          const tests = patch.filter((op) => op.op === 'test');
          expect(tests[0]).toEqual({ op: 'test', path: '/metadata/uid', value: m.uid });
          expect(tests).toHaveLength(2);
          if (current && guard in current)
            expect(tests[1]).toEqual({
              op: 'test',
              path: pointer('metadata', 'annotations', guard),
              value: current[guard],
            });
          else expect(tests[1]).toEqual({ op: 'test', path: '/metadata/resourceVersion', value: m.resourceVersion });
          // Only what differs is written.
          const writes = patch.filter((op) => op.op !== 'test');
          if (current) expect(writes).toHaveLength(Object.entries(values).filter(([k, v]) => current[k] !== v).length);
        },
      ),
      RUNS,
    );
  });

  it('setAnnotationsPatch fails when the guard annotation moved on since it was read', () => {
    const read = {
      uid: 'u1',
      resourceVersion: '7',
      annotations: { [ANNOTATION_CONFIGMETA_GENERATOR]: '3', other: 'x' },
    };
    const patch = setAnnotationsPatch(
      read,
      { [ANNOTATION_CONFIGMETA_GENERATOR]: '4', [ANNOTATION_CONFIGMETA]: '{}' },
      ANNOTATION_CONFIGMETA_GENERATOR,
    );
    const now = {
      metadata: {
        ...read,
        resourceVersion: '9',
        annotations: { ...read.annotations, [ANNOTATION_CONFIGMETA_GENERATOR]: '5' },
      },
    };
    expect(() => apply(now, patch)).toThrow(/Test operation failed/);
    const recreated = { metadata: { ...read, uid: 'u2' } };
    expect(() => apply(recreated, patch)).toThrow(/Test operation failed/);
    // Unchanged since read: applies.
    expect(apply({ metadata: read }, patch).metadata.annotations).toEqual({
      [ANNOTATION_CONFIGMETA_GENERATOR]: '4',
      [ANNOTATION_CONFIGMETA]: '{}',
      other: 'x',
    });
  });

  it('sectionPatch moves a section to the desired value, touching only what differs', () => {
    const section = fc.dictionary(
      fc.constantFrom('lastConfigMetaGenerator', 'connectionsHash', 'a/b', 'c~d', 'conditions', 'members'),
      fc.jsonValue(),
      { maxKeys: 5 },
    );
    fc.assert(
      fc.property(meta, fc.option(section, { nil: undefined }), section, (m, current, desired) => {
        const obj = { metadata: m, spec: { app: 'x' }, ...(current ? { status: current } : {}) };
        const patch = sectionPatch(m, 'status', current, desired, isDeepStrictEqual);
        const canon = (x: unknown) => JSON.parse(JSON.stringify(x)) as unknown;
        if (current && isDeepStrictEqual(current, desired)) expect(patch).toEqual([]);
        if (patch.length === 0) {
          // Nothing to write only when the section already is what is desired.
          expect(current).toBeDefined();
          expect(canon(current)).toEqual(canon(desired));
          return;
        }
        const out = apply(obj, patch);
        expect(canon(out.status)).toEqual(canon(desired));
        expect(out.spec).toEqual(obj.spec);
        expect(patch.slice(0, 2)).toEqual(testIdentity(m));
        // A stale read fails instead of overwriting.
        expect(() => apply({ ...obj, metadata: { ...m, resourceVersion: m.resourceVersion + '0' } }, patch)).toThrow(
          /Test operation failed/,
        );
      }),
      RUNS,
    );
  });

  it('sectionPatch leaves out keys whose desired value is undefined and removes them', () => {
    const patch = sectionPatch(
      { resourceVersion: '5' },
      'status',
      { a: 1, b: 2 },
      { a: 1, b: undefined, c: 3 },
      isDeepStrictEqual,
    );
    expect(patch).toEqual([
      { op: 'test', path: '/metadata/resourceVersion', value: '5' },
      { op: 'add', path: '/status/c', value: 3 },
      { op: 'remove', path: '/status/b' },
    ]);
  });

  it('decideGenerator patch yields the decided generator', () => {
    const names = fc.subarray(['a', 'b', 'c']);
    const conns = fc.option(fc.record({ clusters: names, configmaps: names }), { nil: undefined });
    const gen = fc.option(fc.nat({ max: 50 }), { nil: undefined });
    fc.assert(
      fc.property(conns, gen, conns, gen, fc.boolean(), (oldC, oldG, newC, newG, isCreate) => {
        const object = cluster('c', 'app', { connections: newC, generator: newG });
        const old = cluster('c', 'app', { connections: oldC, generator: oldG });
        const d = decideGenerator(isCreate ? 'CREATE' : 'UPDATE', object, isCreate ? undefined : old);
        const out = apply(object, d.patch);
        expect(out.spec.configMetaGenerator).toBe(d.value);
        expect({ ...out.spec, configMetaGenerator: undefined }).toEqual({
          ...object.spec,
          configMetaGenerator: undefined,
        });
      }),
      RUNS,
    );
  });

  it('decidePodDelivery mounts the guestconfig emptyDir once in each receiving container, and is idempotent', () => {
    const mount = fc.record({
      name: fc.constantFrom('data', 'logs'),
      mountPath: fc.constantFrom('/data', '/var/log', CONFIGMETA_DIR),
    });
    const container = fc.record(
      {
        name: fc.constantFrom('app', 'sidecar', 'init'),
        image: fc.constantFrom('a:1', 'b:2'),
        volumeMounts: fc.array(mount, { maxLength: 2 }),
      },
      { requiredKeys: ['name'] },
    );
    const podArb = fc.record({
      labels: fc.constantFrom(
        { [LABEL_KDCLUSTER]: 'c', 'kubedirector.hpe.com/role': 'r' },
        {},
        { [LABEL_KDCLUSTER]: 'c' },
      ),
      annotations: fc.constantFrom(
        undefined,
        { [ANNOTATION_CONFIGMETA_VOLUME]: 'false' },
        { [ANNOTATION_CONFIGMETA_VOLUME]: 'true' },
      ),
      volumes: fc.option(
        fc.array(fc.record({ name: fc.constantFrom('data', 'logs'), emptyDir: fc.constant({}) }), { maxLength: 2 }),
        { nil: undefined },
      ),
      initContainers: fc.option(fc.array(fc.record({ name: fc.constantFrom('migrate', 'wait') }), { maxLength: 2 }), {
        nil: undefined,
      }),
      containers: fc.array(container, { minLength: 1, maxLength: 3 }),
    });
    fc.assert(
      fc.property(podArb, (p) => {
        const podObj: PodForMutation = {
          metadata: { name: 'p', labels: p.labels, ...(p.annotations ? { annotations: p.annotations } : {}) },
          spec: {
            containers: p.containers,
            ...(p.volumes ? { volumes: p.volumes } : {}),
            ...(p.initContainers ? { initContainers: p.initContainers } : {}),
          },
        };
        const d = decidePodDelivery(podObj);
        const out = apply(podObj, d.patch);
        const member = LABEL_KDCLUSTER in p.labels;
        const optedOut = p.annotations?.[ANNOTATION_CONFIGMETA_VOLUME] === 'false';
        const hasDirMount = (c: { volumeMounts?: { mountPath?: string }[] }) =>
          (c.volumeMounts ?? []).some((m) => m.mountPath === CONFIGMETA_DIR);
        const targets = p.containers.some((c) => c.name === 'app')
          ? p.containers.filter((c) => c.name === 'app')
          : p.containers;
        const wants = member && !optedOut && targets.some((c) => !hasDirMount(c));
        const ours = (out.spec!.volumes ?? []).filter((v) => v.name === CONFIGMETA_VOLUME);
        expect(ours).toHaveLength(wants ? 1 : 0);
        if (wants) {
          out.spec!.containers!.forEach((c, i) => {
            const before = p.containers[i]!;
            const mine = (c.volumeMounts ?? []).filter((m) => m.name === 'kd-guestconfig');
            const receives = targets.includes(before) && !hasDirMount(before);
            expect(mine).toEqual(
              receives ? [{ name: 'kd-guestconfig', mountPath: CONFIGMETA_DIR, subPath: 'guestconfig' }] : [],
            );
            // Existing mounts are kept, in order, in front.
            expect((c.volumeMounts ?? []).slice(0, before.volumeMounts?.length ?? 0)).toEqual(
              before.volumeMounts ?? [],
            );
          });
          // The sidecar runs first; the pod's own init containers follow ours, in their order.
          const inits = (out.spec!.initContainers ?? []).map((c) => c.name);
          expect(inits[0]).toBe('kd-guestconfig');
          expect(inits.slice(inits.length - (p.initContainers?.length ?? 0))).toEqual(
            (p.initContainers ?? []).map((c) => c.name),
          );
          // Mutating the result again changes nothing.
          expect(decidePodDelivery(out).patch).toEqual([]);
        } else {
          expect(d.patch).toEqual([]);
        }
      }),
      RUNS,
    );
  });
});
