/** The pod webhook's mutation: a read-only downward-API volume with configmeta. */
import { describe, expect, it } from '@jest/globals';
import jsonpatch from 'fast-json-patch';
import { CONFIGMETA_VOLUME, configMetaVolume, decidePodVolume, type PodForMutation } from '../src/pod-volume.js';
import { ANNOTATION_CONFIGMETA_VOLUME, LABEL_KDCLUSTER, LABEL_ROLE } from '../src/types.js';

const MOUNT = { name: 'kd-configmeta', mountPath: '/etc/guestconfig', readOnly: true };
const member = (spec: PodForMutation['spec'], annotations?: Record<string, string>): PodForMutation => ({
  metadata: {
    name: 'p',
    labels: { [LABEL_KDCLUSTER]: 'c', [LABEL_ROLE]: 'r' },
    ...(annotations ? { annotations } : {}),
  },
  spec,
});

describe('decidePodVolume', () => {
  it('the volume projects the configmeta annotation to configmeta.json, read-only', () => {
    expect(configMetaVolume()).toEqual({
      name: 'kd-configmeta',
      downwardAPI: {
        defaultMode: 0o444,
        items: [
          {
            path: 'configmeta.json',
            fieldRef: { fieldPath: "metadata.annotations['kubedirector.hpe.com/configmeta']" },
          },
        ],
      },
    });
  });

  it('adds the volume and a mount to every container of a member pod without volumes', () => {
    const p = member({
      containers: [{ name: 'app' }, { name: 'side', volumeMounts: [{ name: 'd', mountPath: '/d' }] }],
    });
    const d = decidePodVolume(p);
    expect(d.patch).toEqual([
      { op: 'add', path: '/spec/volumes', value: [configMetaVolume()] },
      { op: 'add', path: '/spec/containers/0/volumeMounts', value: [MOUNT] },
      { op: 'add', path: '/spec/containers/1/volumeMounts/-', value: MOUNT },
    ]);
    expect(d.reason).toBe('mounted at /etc/guestconfig in 2 container(s)');
    const out = jsonpatch.applyPatch(structuredClone(p), d.patch as jsonpatch.Operation[], true, false).newDocument;
    expect(out.spec!.containers![1]!.volumeMounts).toEqual([{ name: 'd', mountPath: '/d' }, MOUNT]);
  });

  it('appends to existing volumes', () => {
    const d = decidePodVolume(member({ volumes: [{ name: 'data' }], containers: [{ name: 'app' }] }));
    expect(d.patch[0]).toEqual({ op: 'add', path: '/spec/volumes/-', value: configMetaVolume() });
  });

  it('a container that already mounts something at /etc/guestconfig keeps it', () => {
    const d = decidePodVolume(
      member({
        containers: [
          { name: 'app', volumeMounts: [{ name: 'own', mountPath: '/etc/guestconfig/' }] },
          { name: 'side' },
        ],
      }),
    );
    expect(d.patch.map((op) => op.path)).toEqual(['/spec/volumes', '/spec/containers/1/volumeMounts']);
    expect(
      decidePodVolume(
        member({ containers: [{ name: 'app', volumeMounts: [{ name: 'own', mountPath: '/etc/guestconfig' }] }] }),
      ),
    ).toEqual({ patch: [], reason: 'no container to mount into' });
  });

  it('leaves alone: non-members, opted-out pods, pods that already have the volume', () => {
    expect(
      decidePodVolume({ metadata: { name: 'p', labels: { app: 'x' } }, spec: { containers: [{ name: 'a' }] } }),
    ).toEqual({
      patch: [],
      reason: 'not a member pod (no kubedirector.hpe.com/kdcluster label)',
    });
    expect(
      decidePodVolume(member({ containers: [{ name: 'a' }] }, { [ANNOTATION_CONFIGMETA_VOLUME]: 'false' })),
    ).toEqual({
      patch: [],
      reason: 'opted out by kubedirector.hpe.com/configmeta-volume: "false"',
    });
    expect(decidePodVolume(member({ volumes: [{ name: CONFIGMETA_VOLUME }], containers: [{ name: 'a' }] }))).toEqual({
      patch: [],
      reason: 'volume already present',
    });
    // Any other annotation value does not opt out.
    expect(
      decidePodVolume(member({ containers: [{ name: 'a' }] }, { [ANNOTATION_CONFIGMETA_VOLUME]: 'true' })).patch,
    ).toHaveLength(2);
  });

  it('a pod without spec or containers gets nothing', () => {
    expect(decidePodVolume(member(undefined)).patch).toEqual([]);
    expect(decidePodVolume({}).patch).toEqual([]);
  });
});
