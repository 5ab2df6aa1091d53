/** Validating webhook for KubeDirectorClusters: the connection rules of shared/, every violation at once. */
import { GROUP, validateCluster, type KDCluster } from '@kd-connections/shared/domain';
import type { Decision } from '../admission-review.js';
import { withIdentity, type Webhook } from '../webhook.js';
import { prefetchConnections } from '../prefetch-connections.js';
import { ruleDecision } from './rule-decision.js';

export const validateKdCluster: Webhook = {
  name: 'validate-kdcluster',
  path: '/validate-kdcluster',
  group: GROUP,
  kind: 'KubeDirectorCluster',
  operations: ['CREATE', 'UPDATE'],
  async decide(request, deps): Promise<Decision> {
    const object = withIdentity(request.object as unknown as KDCluster, request);
    const oldObject = request.operation === 'UPDATE' ? (request.oldObject as KDCluster) : undefined;
    await prefetchConnections(object, deps.lookup, deps.rules);
    const result = await validateCluster({ operation: request.operation, object, oldObject }, deps.lookup, deps.rules);
    return ruleDecision('KubeDirectorCluster', object.metadata, result, 'connections allowed');
  },
};
