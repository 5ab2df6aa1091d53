/** The pod webhook's mutation: the guestconfig sidecar, the seed init containers, the volumes and mounts. */
import { describe, expect, it } from '@jest/globals';
import jsonpatch from 'fast-json-patch';
import {
  configMetaVolume,
  decidePodDelivery,
  deliveryUser,
  seedScript,
  type PodForMutation,
} from '../src/delivery/pod-delivery.js';
import { ANNOTATION_CONFIGMETA_VOLUME, LABEL_KDCLUSTER, LABEL_ROLE } from '../src/domain/types.js';
import { hasConfigMetaDelivery } from '../src/domain/guestconfig-layout.js';

const IMAGE = 'registry.invalid/kd-guestconfig:9';
const MOUNT = { name: 'kd-guestconfig', mountPath: '/etc/guestconfig', subPath: 'guestconfig' };
const member = (spec: PodForMutation['spec'], annotations?: Record<string, string>): PodForMutation => ({
  metadata: {
    name: 'p',
    labels: { [LABEL_KDCLUSTER]: 'c', [LABEL_ROLE]: 'r' },
    ...(annotations ? { annotations } : {}),
  },
  spec,
});
type Out = Required<PodForMutation>['spec'] & {
  initContainers: Record<string, any>[];
  containers: Record<string, any>[];
  volumes: Record<string, any>[];
};
function mutate(p: PodForMutation) {
  const d = decidePodDelivery(p, { image: IMAGE });
  const out = jsonpatch.applyPatch(structuredClone(p), d.patch as jsonpatch.Operation[], true, false).newDocument;
  return { d, spec: out.spec as Out };
}

describe('decidePodDelivery', () => {
  it('the source volume projects the configmeta, generator, splice and roster annotations', () => {
    expect(configMetaVolume()).toEqual({
      name: 'kd-configmeta',
      downwardAPI: {
        defaultMode: 0o444,
        items: [
          {
            path: 'configmeta.json',
            fieldRef: { fieldPath: "metadata.annotations['kubedirector.hpe.com/configmeta']" },
          },
          {
            path: 'generator',
            fieldRef: { fieldPath: "metadata.annotations['kubedirector.hpe.com/configmeta-generator']" },
          },
          {
            path: 'splice',
            fieldRef: { fieldPath: "metadata.annotations['kd-connections.hpe.com/configmeta-splice']" },
          },
          {
            path: 'roster',
            fieldRef: { fieldPath: "metadata.annotations['kd-connections.hpe.com/configmeta-roster']" },
          },
        ],
      },
    });
  });

  it('with an app container: sidecar first, one seed from the app image, the emptyDir in app only', () => {
    const { d, spec } = mutate(
      member({
        containers: [
          { name: 'side', image: 'busybox:1', volumeMounts: [{ name: 'd', mountPath: '/d' }] },
          { name: 'app', image: 'kd/app:1', imagePullPolicy: 'Never' },
        ],
      }),
    );
    expect(d.reason).toBe('sidecar kd-guestconfig delivers /etc/guestconfig to app (seeded from 1 image(s))');
    expect(spec.initContainers.map((c) => c.name)).toEqual(['kd-guestconfig', 'kd-guestconfig-seed-0']);
    const [sidecar, seed] = spec.initContainers;
    expect(sidecar).toMatchObject({
      image: IMAGE,
      restartPolicy: 'Always',
      command: ['/kd/bin/guestconfig-sync'],
      startupProbe: { exec: { command: ['/bin/test', '-s', '/etc/guestconfig/guestconfig/configmeta.json'] } },
      env: [{ name: 'KD_SECRET_DELIVERY', value: 'document' }],
      securityContext: {
        runAsUser: 0,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'], add: ['DAC_OVERRIDE'] },
      },
    });
    // The sidecar alone mounts the emptyDir's root (it creates the subdirectory the app mounts).
    expect(sidecar!.volumeMounts).toEqual([
      { name: 'kd-configmeta', mountPath: '/kd/source', readOnly: true },
      { name: 'kd-configmeta-private', mountPath: '/kd/private', readOnly: true },
      { name: 'kd-guestconfig', mountPath: '/etc/guestconfig' },
      { name: 'kd-guestconfig-tools', mountPath: '/kd-tools' },
    ]);
    expect(seed).toMatchObject({
      image: 'kd/app:1',
      imagePullPolicy: 'Never',
      command: ['/kd-tools/busybox', 'sh', '-c', seedScript()],
      volumeMounts: [
        { name: 'kd-guestconfig', mountPath: '/kd-seed', subPath: 'guestconfig' },
        { name: 'kd-guestconfig-tools', mountPath: '/kd-tools', readOnly: true },
      ],
    });
    expect(spec.containers[0]!.volumeMounts).toEqual([{ name: 'd', mountPath: '/d' }]);
    expect(spec.containers[1]!.volumeMounts).toEqual([MOUNT]);
    // kubectl exec/logs without -c go to the app, without a "Defaulted container" notice.
    expect(d.patch).toContainEqual({
      op: 'add',
      path: '/metadata/annotations',
      value: { 'kubectl.kubernetes.io/default-container': 'app' },
    });
    expect(spec.volumes).toEqual([
      configMetaVolume(),
      {
        name: 'kd-configmeta-private',
        secret: { secretName: 'kd-configmeta-private-c', optional: true, defaultMode: 0o400 },
      },
      { name: 'kd-guestconfig', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
      { name: 'kd-guestconfig-tools', emptyDir: { sizeLimit: '16Mi' } },
    ]);
    // A pod that is not Guaranteed: a small request, a memory limit, no CPU limit (never throttled).
    for (const c of spec.initContainers)
      expect(c.resources).toEqual({ requests: { cpu: '5m', memory: '16Mi' }, limits: { memory: '32Mi' } });
  });

  it('a Guaranteed pod stays Guaranteed: requests equal limits in what is injected', () => {
    const limits = { cpu: '1', memory: '1Gi' };
    const { spec } = mutate(
      member({
        containers: [{ name: 'app', image: 'a:1', resources: { limits, requests: { cpu: '1', memory: '1Gi' } } }],
      }),
    );
    for (const c of spec.initContainers) {
      expect(c.resources.requests).toEqual(c.resources.limits);
      expect(Object.keys(c.resources.limits).sort()).toEqual(['cpu', 'memory']);
    }
    // One container without limits makes the pod Burstable anyway: then no CPU limit.
    const burstable = mutate(
      member({
        containers: [
          { name: 'app', image: 'a:1', resources: { limits } },
          { name: 'b', image: 'b:1' },
        ],
      }),
    );
    expect(burstable.spec.initContainers[0]!.resources.limits).toEqual({ memory: '32Mi' });
  });

  it('without an app container: every container, one seed per distinct image', () => {
    const { d, spec } = mutate(
      member({
        containers: [
          { name: 'a', image: 'img:1' },
          { name: 'b', image: 'img:2', volumeMounts: [] },
          { name: 'c', image: 'img:1' },
        ],
      }),
    );
    expect(d.reason).toBe('sidecar kd-guestconfig delivers /etc/guestconfig to a, b, c (seeded from 2 image(s))');
    expect(spec.initContainers.map((c) => [c.name, c.image])).toEqual([
      ['kd-guestconfig', IMAGE],
      ['kd-guestconfig-seed-0', 'img:1'],
      ['kd-guestconfig-seed-1', 'img:2'],
    ]);
    expect(spec.containers.map((c) => c.volumeMounts)).toEqual([[MOUNT], [MOUNT], [MOUNT]]);
    // No app container: kubectl's default container is left to the pod.
    expect(d.patch.some((op) => op.path.startsWith('/metadata'))).toBe(false);
  });

  it("keeps the pod's volumes and init containers, ours in front", () => {
    const { d, spec } = mutate(
      member({
        volumes: [{ name: 'data', emptyDir: {} }],
        initContainers: [{ name: 'migrate', image: 'm:1' }],
        containers: [{ name: 'app', image: 'a:1' }],
      }),
    );
    expect(d.patch.filter((op) => op.path === '/spec/volumes/-')).toHaveLength(4);
    expect(spec.volumes.map((v) => v.name)).toEqual([
      'data',
      'kd-configmeta',
      'kd-configmeta-private',
      'kd-guestconfig',
      'kd-guestconfig-tools',
    ]);
    expect(spec.initContainers.map((c) => c.name)).toEqual(['kd-guestconfig', 'kd-guestconfig-seed-0', 'migrate']);
  });

  it('a receiving container that already mounts /etc/guestconfig keeps it, and the reason says so', () => {
    const own = { name: 'own', mountPath: '/etc/guestconfig/' };
    const { d, spec } = mutate(
      member({
        containers: [
          { name: 'x', image: 'i:1', volumeMounts: [own] },
          { name: 'y', image: 'i:2' },
        ],
      }),
    );
    expect(d.reason).toBe(
      'sidecar kd-guestconfig delivers /etc/guestconfig to y (seeded from 1 image(s)); kept the existing mount at /etc/guestconfig in x',
    );
    expect(spec.containers[0]!.volumeMounts).toEqual([own]);
    expect(spec.initContainers.map((c) => c.image)).toEqual([IMAGE, 'i:2']);
    // The app container decides alone when there is one: its own mount means nothing to deliver.
    expect(
      decidePodDelivery(
        member({
          containers: [
            { name: 'app', volumeMounts: [{ name: 'own', mountPath: '/etc/guestconfig' }] },
            { name: 'side' },
          ],
        }),
      ),
    ).toEqual({ patch: [], reason: 'no container to deliver to; kept the existing mount at /etc/guestconfig in app' });
  });

  it('leaves alone: non-members, opted-out pods, pods already mutated, and names already taken', () => {
    const containers = [{ name: 'app', image: 'a:1' }];
    expect(decidePodDelivery({ metadata: { name: 'p', labels: { app: 'x' } }, spec: { containers } })).toEqual({
      patch: [],
      reason: 'not a member pod (no kubedirector.hpe.com/kdcluster label)',
    });
    expect(decidePodDelivery(member({ containers }, { [ANNOTATION_CONFIGMETA_VOLUME]: 'false' }))).toEqual({
      patch: [],
      reason: 'opted out by kubedirector.hpe.com/configmeta-volume: "false"',
    });
    const once = mutate(member({ containers }));
    expect(decidePodDelivery({ metadata: member({}).metadata, spec: once.spec })).toEqual({
      patch: [],
      reason: 'volume kd-configmeta already present',
    });
    expect(decidePodDelivery(member({ volumes: [{ name: 'kd-guestconfig' }], containers })).reason).toBe(
      'not injected: the pod already has a volume named kd-guestconfig',
    );
    expect(decidePodDelivery(member({ initContainers: [{ name: 'kd-guestconfig-seed-0' }], containers }))).toEqual({
      patch: [],
      reason: 'not injected: the pod already has an init container named kd-guestconfig-seed-0',
    });
    // Any other annotation value does not opt out.
    expect(decidePodDelivery(member({ containers }, { [ANNOTATION_CONFIGMETA_VOLUME]: 'true' })).patch).not.toEqual([]);
  });

  it("adds kubectl's default container to existing annotations, and keeps one the pod chose", () => {
    const containers = [
      { name: 'side', image: 's:1' },
      { name: 'app', image: 'a:1' },
    ];
    const d = decidePodDelivery(member({ containers }, { team: 'ml' }));
    expect(d.patch).toContainEqual({
      op: 'add',
      path: '/metadata/annotations/kubectl.kubernetes.io~1default-container',
      value: 'app',
    });
    const chosen = decidePodDelivery(member({ containers }, { 'kubectl.kubernetes.io/default-container': 'side' }));
    expect(chosen.patch.some((op) => op.path.startsWith('/metadata'))).toBe(false);
  });

  it('a pod without spec or containers gets nothing', () => {
    expect(decidePodDelivery(member(undefined)).patch).toEqual([]);
    expect(decidePodDelivery({}).patch).toEqual([]);
  });

  it('hasConfigMetaDelivery: the kd-configmeta volume, in the sidecar layout or the older one', () => {
    expect(hasConfigMetaDelivery(mutate(member({ containers: [{ name: 'app', image: 'a' }] })).spec)).toBe(true);
    expect(hasConfigMetaDelivery({ volumes: [configMetaVolume()] })).toBe(true);
    expect(hasConfigMetaDelivery({ volumes: [{ name: 'other' }] })).toBe(false);
    expect(hasConfigMetaDelivery(undefined)).toBe(false);
  });
});

describe('deliveryUser: root unless the pod asks for non-root', () => {
  const c = (sc?: Record<string, unknown>) => ({ name: 'app', image: 'i', ...(sc ? { securityContext: sc } : {}) });
  it('is root for a pod that says nothing', () => {
    expect(deliveryUser({ spec: { containers: [c()] } }, [c()])).toEqual({ uid: 0, gid: 0, nonRoot: false });
  });
  it("takes the pod's runAsUser and fsGroup when the pod is non-root", () => {
    const pod = {
      spec: { securityContext: { runAsNonRoot: true, runAsUser: 1000, fsGroup: 2000 }, containers: [c()] },
    };
    expect(deliveryUser(pod, [c()])).toEqual({ uid: 1000, gid: 2000, nonRoot: true });
  });
  it('follows the receiving containers when they all ask for non-root, and falls back to a fixed uid', () => {
    const app = c({ runAsNonRoot: true });
    expect(deliveryUser({ spec: { containers: [app] } }, [app])).toEqual({ uid: 65532, gid: 65532, nonRoot: true });
    const mixed = [c({ runAsUser: 7 }), c()];
    expect(deliveryUser({ spec: { containers: mixed } }, mixed).nonRoot).toBe(false);
  });
  it('makes every injected container non-root with the RuntimeDefault seccomp profile', () => {
    const pod = member({
      securityContext: { runAsNonRoot: true, runAsUser: 1000, fsGroup: 2000 },
      containers: [{ name: 'app', image: 'kd/app:1' }],
    });
    const { spec } = mutate(pod);
    for (const ic of spec.initContainers) {
      expect(ic.securityContext).toEqual({
        runAsUser: 1000,
        runAsGroup: 2000,
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
    }
  });
});
