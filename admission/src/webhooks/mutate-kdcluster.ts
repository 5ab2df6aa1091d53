/**
 * Mutating webhook for KubeDirectorClusters: spec.configMetaGenerator, decided by shared/'s
 * decideGenerator from the old object, so re-applying an unchanged manifest never produces a patch.
 */
import { decideGenerator, GROUP, type KDCluster } from '@kd-connections/shared';
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
    assertPatchApplies(d.patch, object, 'configMetaGenerator');
    return { allowed: true, patch: d.patch, note: d.reason };
  },
};
