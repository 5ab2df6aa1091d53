/**
 * Mutating webhook for member pods: the configmeta downward-API volume and its mount (shared/'s
 * decidePodVolume). Registered with an objectSelector on the kdcluster label, so other pods never
 * reach it; a pod without the label that arrives anyway is left alone.
 */
import { decidePodVolume, type PodForMutation } from '@kd-connections/shared';
import type { Decision } from '../admission-review.js';
import { assertPatchApplies } from '../patch-check.js';
import type { Webhook } from '../webhook.js';

export const mutatePod: Webhook = {
  name: 'mutate-pod',
  path: '/mutate-pod',
  group: '',
  kind: 'Pod',
  operations: ['CREATE'],
  decide(request): Decision {
    const pod = request.object as PodForMutation;
    const d = decidePodVolume(pod);
    assertPatchApplies(d.patch, pod, 'configmeta volume');
    return { allowed: true, patch: d.patch, note: d.reason };
  },
};
