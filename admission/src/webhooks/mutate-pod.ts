/**
 * Mutating webhook for member pods: the kd-guestconfig sidecar, the seed init containers and the volumes
 * that deliver /etc/guestconfig/configmeta.json (shared/'s decidePodDelivery). Registered with an
 * objectSelector on the kdcluster label, so other pods never reach it; a pod without the label that
 * arrives anyway is left alone.
 */
import { decidePodDelivery, type PodForMutation } from '@kd-connections/shared/delivery';
import type { Decision } from '../admission-review.js';
import { assertPatchApplies } from '../patch-check.js';
import type { Webhook } from '../webhook.js';

export const mutatePod: Webhook = {
  name: 'mutate-pod',
  path: '/mutate-pod',
  group: '',
  kind: 'Pod',
  operations: ['CREATE'],
  decide(request, deps): Decision {
    const pod = request.object as PodForMutation;
    const d = decidePodDelivery(pod, deps.delivery);
    assertPatchApplies(d.patch, pod, 'configmeta delivery');
    return { allowed: true, patch: d.patch, note: d.reason };
  },
};
