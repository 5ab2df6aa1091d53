import { mutateKdCluster } from './mutate-kdcluster.js';
import { mutatePod } from './mutate-pod.js';
import { validateKdApp } from './validate-kdapp.js';
import { validateKdCluster } from './validate-kdcluster.js';
import type { Webhook } from '../webhook.js';

export { mutateKdCluster, mutatePod, validateKdApp, validateKdCluster };

/** Every webhook the service serves. */
export const WEBHOOKS: readonly Webhook[] = [validateKdCluster, mutateKdCluster, validateKdApp, mutatePod];
