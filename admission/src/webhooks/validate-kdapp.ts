/** Validating webhook for KubeDirectorApps: a well-formed connectable_to; warns when an update tightens it. */
import { GROUP, validateApp, type KDApp } from '@kd-connections/shared/domain';
import type { Decision } from '../admission-review.js';
import { withIdentity, type Webhook } from '../webhook.js';
import { ruleDecision } from './rule-decision.js';

export const validateKdApp: Webhook = {
  name: 'validate-kdapp',
  path: '/validate-kdapp',
  group: GROUP,
  kind: 'KubeDirectorApp',
  operations: ['CREATE', 'UPDATE'],
  async decide(request, deps): Promise<Decision> {
    const object = withIdentity(request.object as unknown as KDApp, request);
    const oldObject = request.operation === 'UPDATE' ? (request.oldObject as KDApp) : undefined;
    const result = await validateApp({ operation: request.operation, object, oldObject }, deps.lookup, deps.rules);
    return ruleDecision('KubeDirectorApp', object.metadata, result, 'connectable_to valid');
  },
};
