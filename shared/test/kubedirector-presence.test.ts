import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { guardEventTarget } from '../src/kubedirector/guard.js';
import { kubeDirectorFindings, kubeDirectorGuardMessage } from '../src/kubedirector/presence.js';

/** kd-connections' own kdcluster schema, as the chart installs it. */
const own = parse(
  readFileSync(
    fileURLToPath(
      new URL('../../charts/kd-connections/files/crds/kubedirector.hpe.com_kubedirectorclusters.yaml', import.meta.url),
    ),
    'utf8',
  ),
).spec.versions[0].schema.openAPIV3Schema;

/** KubeDirector's: spec and status without kd-connections' fields. */
const kubeDirectors = {
  type: 'object',
  properties: {
    spec: { type: 'object', properties: { app: { type: 'string' }, connections: { type: 'object' } } },
    status: { type: 'object', properties: { state: { type: 'string' }, lastNodeID: { type: 'integer' } } },
  },
};

describe('kubeDirectorFindings', () => {
  it('finds nothing on kd-connections own CRDs, or when the group is not served', () => {
    expect(
      kubeDirectorFindings({ resources: ['kubedirectorclusters', 'kubedirectorapps'], clusterSchema: own }),
    ).toEqual([]);
    expect(kubeDirectorFindings({ resources: undefined, clusterSchema: undefined })).toEqual([]);
    // A schema not published yet is not evidence either way.
    expect(kubeDirectorFindings({ resources: ['kubedirectorclusters'], clusterSchema: undefined })).toEqual([]);
  });

  it("names KubeDirector's schema by the fields it lacks, and its operator by the resources only it installs", () => {
    expect(kubeDirectorFindings({ resources: ['kubedirectorclusters'], clusterSchema: kubeDirectors })).toEqual([
      "the kubedirectorclusters CRD is not kd-connections' (its schema has no spec.configMetaGenerator and status.lastConfigMetaGenerator, so they would be pruned)",
    ]);
    expect(
      kubeDirectorFindings({
        resources: ['kubedirectorclusters', 'kubedirectorapps', 'kubedirectorconfigs', 'kubedirectorstatusbackups'],
        clusterSchema: own,
      }),
    ).toEqual([
      "KubeDirector's operator is installed (the API serves kubedirectorconfigs.kubedirector.hpe.com and kubedirectorstatusbackups.kubedirector.hpe.com)",
    ]);
  });

  it('names the operator by its Deployment and its webhook configuration; unknown (unreadable) is no finding', () => {
    expect(
      kubeDirectorFindings({
        resources: undefined,
        clusterSchema: undefined,
        operatorDeployments: ['kd-ops/kubedirector', 'other/kubedirector'],
        operatorWebhook: true,
      }),
    ).toEqual([
      "KubeDirector's operator Deployment exists (kd-ops/kubedirector, other/kubedirector)",
      "KubeDirector's operator registered its webhook configuration kubedirector-webhook",
    ]);
    expect(
      kubeDirectorFindings({
        resources: undefined,
        clusterSchema: undefined,
        operatorDeployments: [],
        operatorWebhook: false,
      }),
    ).toEqual([]);
    expect(
      kubeDirectorFindings({
        resources: ['kubedirectorclusters'],
        clusterSchema: own,
        operatorDeployments: undefined,
        operatorWebhook: undefined,
      }),
    ).toEqual([]);
  });

  it('the message says what to set', () => {
    const m = kubeDirectorGuardMessage('kd-connections reconciler', ['x']);
    expect(m).toMatch(/^kd-connections reconciler is not acting: x\. /);
    expect(m).toContain('set kubedirector.enabled=true');
    expect(m).toContain('--kubedirector-mode=true');
  });
});

describe('guardEventTarget', () => {
  it("is the service's own Pod in the release namespace when the chart runs it, else the kdcluster CRD", () => {
    const pod = { apiVersion: 'v1', kind: 'Pod', namespace: 'kd-system', name: 'kd-admission-0' };
    expect(guardEventTarget({ POD_NAMESPACE: 'kd-system', POD_NAME: 'kd-admission-0' })).toEqual(pod);
    expect(
      guardEventTarget({ POD_NAMESPACE: 'kd-system', KD_RECONCILER_LEADER_ELECT_IDENTITY: 'kd-admission-0' }),
    ).toEqual(pod);
    expect(guardEventTarget({})).toEqual({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      name: 'kubedirectorclusters.kubedirector.hpe.com',
    });
  });
});
