/**
 * GitOps tools (Flux, Argo CD with ServerSideApply) write with server-side apply. The examples and the
 * KubeDirector-style manifests must apply that way too, re-apply without a change, and leave a
 * configMetaGenerator that another field manager set alone.
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { useTestEnv } from '../support/cluster.js';
import { yamlDocs } from './kd.js';
import { installCrds } from '../support/crds.js';
import { ok, repoPath } from '../support/processes.js';

const env = useTestEnv();

beforeAll(async () => {
  await installCrds(env);
});

const versions = async () =>
  ok(
    await env.kubectl([
      'get',
      'kdapp,kdcluster,configmap,secret',
      '-o',
      'jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.resourceVersion}{"\\n"}{end}',
    ]),
    'get versions',
  ).stdout;

describe('server-side apply', () => {
  const fixtures = repoPath('test/fixtures/kubedirector');

  it('applies the examples and the KubeDirector-style manifests, and a re-apply changes nothing', async () => {
    const first = ok(await env.kubectl(['apply', '--server-side', '-k', repoPath('examples')]), 'ssa examples');
    const lines = first.stdout.trim().split('\n');
    expect(lines).toHaveLength(13);
    for (const l of lines) expect(l).toMatch(/ serverside-applied$/);
    ok(await env.kubectl(['apply', '--server-side', '-f', fixtures]), 'ssa fixtures');

    // Read back exactly as written (nothing pruned).
    for (const doc of yamlDocs(`${fixtures}/cluster-spark-notebook.yaml`)) {
      const name = (doc.metadata as { name: string }).name;
      const stored = JSON.parse(ok(await env.kubectl(['get', 'kdcluster', name, '-o', 'json']), 'get').stdout);
      expect(stored.spec).toEqual(doc.spec);
    }

    const before = await versions();
    expect(before).toContain('KubeDirectorCluster/spark-notebook-instance=');
    ok(await env.kubectl(['apply', '--server-side', '-k', repoPath('examples')]), 'ssa examples again');
    ok(await env.kubectl(['apply', '--server-side', '-f', fixtures]), 'ssa fixtures again');
    expect(await versions()).toBe(before);
    for (const args of [
      ['-k', repoPath('examples')],
      ['-f', fixtures],
    ]) {
      const diff = await env.kubectl(['diff', '--server-side', ...args]);
      expect({ code: diff.code, stdout: diff.stdout }).toEqual({ code: 0, stdout: '' });
    }
  });

  it('a generator set by another field manager survives a re-apply of a manifest without it', async () => {
    // As the webhook or the reconciler would: its own field manager.
    ok(
      await env.kubectl([
        'patch',
        'kdcluster',
        'notebook',
        '--type=merge',
        '--field-manager=kd-connections-reconciler',
        '-p',
        '{"spec":{"configMetaGenerator":3}}',
      ]),
      'bump',
    );
    ok(await env.kubectl(['apply', '--server-side', '-k', repoPath('examples')]), 'ssa examples');
    const g = ok(
      await env.kubectl(['get', 'kdcluster', 'notebook', '-o', 'jsonpath={.spec.configMetaGenerator}']),
      'get',
    );
    expect(g.stdout).toBe('3');
    const diff = await env.kubectl(['diff', '--server-side', '-k', repoPath('examples')]);
    expect({ code: diff.code, stdout: diff.stdout }).toEqual({ code: 0, stdout: '' });
  });
});
