/**
 * Mutating webhook for KubeDirectorClusters: spec.configMetaGenerator, decided by shared/'s
 * decideGenerator from the old object, so re-applying an unchanged manifest never produces a patch.
 * A value that is not a whole number (e.g. the string "5") is refused, not silently replaced.
 */
import { decideGenerator, denialMessage, GROUP, type KDCluster } from '@kd-connections/shared';
import type { Decision } from '../admission-review.js';
import { assertPatchApplies } from '../patch-check.js';
import type { Webhook } from '../webhook.js';

export const mutateKdCluster: Webhook = {
  name: 'mutate-kdcluster',
  path: '/mutate-kdcluster',
  group: GROUP,
  kind: 'KubeDirectorCluster',
  operations: ['CREATE', 'UPDATE'],
  decide(request): Decision {
    const object = request.object as unknown as KDCluster;
    const oldObject = request.operation === 'UPDATE' ? (request.oldObject as KDCluster) : undefined;
    const d = decideGenerator(request.operation, object, oldObject);
    if (d.error) {
      const meta = object.metadata ?? {};
      return {
        allowed: false,
        code: 403,
        message: denialMessage('KubeDirectorCluster', meta.namespace, meta.name ?? meta.generateName, [d.error]),
        fields: [d.error.field],
      };
    }
    assertPatchApplies(d.patch, object, 'configMetaGenerator');
    return { allowed: true, patch: d.patch, note: d.reason };
  },
};
