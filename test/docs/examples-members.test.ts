/**
 * examples/members/ is what the seat rule asks of a user's member workloads (docs/app-authors.md): for every
 * role of every example kdcluster one StatefulSet with replicas = members, Parallel, ordinals from 0, the two
 * labels and a container `app`, and the cluster's headless Service as serviceName. `npm start` runs them
 * (test/e2e/local-start.test.ts checks every pod gets its configmeta there).
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { repoPath } from '../support/processes.js';

type Doc = Record<string, any>;
const docs = (file: string): Doc[] =>
  parseAllDocuments(readFileSync(repoPath(file), 'utf8')).map((d) => d.toJSON() as Doc);

describe('examples/members/members.yaml', () => {
  const clusters = docs('examples/40-clusters.yaml').filter((d) => d.kind === 'KubeDirectorCluster');
  const members = docs('examples/members/members.yaml');
  const sets = members.filter((d) => d.kind === 'StatefulSet');
  const services = members.filter((d) => d.kind === 'Service');

  it('has one StatefulSet per role of every example cluster, with replicas equal to its members', () => {
    const want = clusters.flatMap((c) =>
      (c.spec.roles as Doc[]).map((r) => `${c.metadata.name}/${r.id}=${r.members as number}`),
    );
    const got = sets.map(
      (s) =>
        `${s.spec.template.metadata.labels['kubedirector.hpe.com/kdcluster']}/${s.spec.template.metadata.labels['kubedirector.hpe.com/role']}=${s.spec.replicas}`,
    );
    expect(got.sort()).toEqual(want.sort());
    expect(want.length).toBeGreaterThanOrEqual(7);
  });

  it('each StatefulSet: Parallel, ordinals from 0, selector = the labels, a container named app, the headless Service', () => {
    for (const s of sets) {
      const labels = s.spec.template.metadata.labels;
      expect({ name: s.metadata.name, policy: s.spec.podManagementPolicy, ordinals: s.spec.ordinals }).toEqual({
        name: s.metadata.name,
        policy: 'Parallel',
        ordinals: undefined,
      });
      expect(s.spec.selector.matchLabels).toEqual(labels);
      expect(s.spec.template.spec.containers.map((c: Doc) => c.name)).toContain('app');
      const svc = services.find((v) => v.metadata.name === s.spec.serviceName);
      expect({ set: s.metadata.name, headless: svc?.spec.clusterIP }).toEqual({
        set: s.metadata.name,
        headless: 'None',
      });
      expect(svc!.metadata.name).toBe(labels['kubedirector.hpe.com/kdcluster']);
    }
  });
});
