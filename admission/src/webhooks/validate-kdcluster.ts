/** Validating webhook for KubeDirectorClusters: the connection rules of shared/, every violation at once. */
import { denialMessage, GROUP, validateCluster, type KDCluster } from '@kd-connections/shared';
import type { Decision } from '../admission-review.js';
import { withIdentity, type Webhook } from '../webhook.js';

export const validateKdCluster: Webhook = {
  name: 'validate-kdcluster',
  path: '/validate-kdcluster',
  group: GROUP,
  kind: 'KubeDirectorCluster',
  operations: ['CREATE', 'UPDATE'],
  async decide(request, deps): Promise<Decision> {
    const object = withIdentity(request.object as unknown as KDCluster, request);
    const oldObject = request.oldObject as KDCluster | undefined;
    const result = await validateCluster(
      { operation: request.operation, object, oldObject: request.operation === 'UPDATE' ? oldObject : undefined },
      deps.lookup,
      deps.rules,
    );
    if (result.errors.length === 0) {
      return { allowed: true, warnings: result.warnings, note: 'connections allowed' };
    }
    const meta = object.metadata ?? {};
    return {
      allowed: false,
      code: 403,
      message: denialMessage('KubeDirectorCluster', meta.namespace, meta.name ?? meta.generateName, result.errors),
      warnings: result.warnings,
      fields: result.errors.map((e) => e.field),
    };
  },
};
