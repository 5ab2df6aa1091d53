/**
 * Mutating webhook for KubeDirectorClusters: spec.configMetaGenerator, decided by shared/'s
 * decideGenerator from the old object, so re-applying an unchanged manifest never produces a patch.
 * A value that is not a whole number (e.g. the string "5") is refused, not silently replaced.
 *
 * It also makes one apply name every problem. The API server runs the mutating webhooks, then the
 * schema and its CEL rules, then the validating webhooks; a repeated entry, a self-connection or a bad
 * name is refused by the schema, so the validating webhook never gets to name the rest. When the
 * request (as this webhook would patch it) has such a problem, this webhook runs the validating rules
 * itself and, when they find more than the schema will, denies with all of them (otherwise the
 * schema's answer already names everything, and it is left to give it). Nothing is lost while admission is down: the schema still refuses
 * those, and the validating webhook (failurePolicy Fail) everything else.
 */
import {
  decideGenerator,
  denialMessage,
  GROUP,
  lookupFreeErrors,
  validateCluster,
  type KDCluster,
} from '@kd-connections/shared/domain';
import type { Decision } from '../admission-review.js';
import { assertPatchApplies } from '../patch-check.js';
import { withIdentity, type Webhook } from '../webhook.js';
import { ruleDecision } from './rule-decision.js';

export const mutateKdCluster: Webhook = {
  name: 'mutate-kdcluster',
  path: '/mutate-kdcluster',
  group: GROUP,
  kind: 'KubeDirectorCluster',
  operations: ['CREATE', 'UPDATE'],
  async decide(request, deps): Promise<Decision> {
    const object = withIdentity(request.object as unknown as KDCluster, request);
    const oldObject = request.operation === 'UPDATE' ? (request.oldObject as KDCluster) : undefined;
    const d = decideGenerator(request.operation, object, oldObject);
    // The object the schema will see: with the generator this webhook keeps or sets.
    const patched: KDCluster =
      d.error || d.value === undefined ? object : { ...object, spec: { ...object.spec, configMetaGenerator: d.value } };
    const review = { operation: request.operation, object: patched, oldObject };
    const schemaWillRefuse = lookupFreeErrors(review).length;
    if (schemaWillRefuse > 0) {
      // The full rules find these too; when they find nothing more, the schema's own answer is complete.
      const all = await validateCluster(review, deps.lookup, deps.rules);
      if (all.errors.length > schemaWillRefuse)
        return ruleDecision('KubeDirectorCluster', object.metadata, all, 'invalid');
    }
    if (d.error) {
      const meta = object.metadata ?? {};
      return {
        allowed: false,
        code: 403,
        message: denialMessage('KubeDirectorCluster', meta.namespace, meta.name ?? meta.generateName, [d.error]),
        fields: [d.error.field],
      };
    }
    assertPatchApplies(d.patch, request.object, 'configMetaGenerator');
    return { allowed: true, patch: d.patch, note: d.reason };
  },
};
