/**
 * The manifests in examples/ against the rules: applied in kustomization order every object is admitted,
 * and examples/denied is denied with a message that names the connected app and what is allowed.
 */
import { describe, expect, it } from '@jest/globals';
import { formatFieldError } from '../src/domain/field-errors.js';
import { decideGenerator } from '../src/domain/generator.js';
import type { ConfigMapLike, KDApp, KDCluster, ObjectMeta } from '../src/domain/types.js';
import { validateApp } from '../src/domain/validate-kdapp.js';
import { validateCluster } from '../src/domain/validate-kdcluster.js';
import { MemoryWorld, NS, SYSTEM_NS, exampleDocs } from './fixtures.js';

const OPTS = { systemNamespace: SYSTEM_NS };
const inNs = <T extends { metadata: { namespace?: string } }>(o: T): T => ({
  ...o,
  metadata: { ...o.metadata, namespace: NS },
});

describe('examples/', () => {
  it('apply in kustomization order without a denial or a warning', async () => {
    const kustomization = exampleDocs('kustomization.yaml')[0] as { resources: string[] };
    const w = new MemoryWorld();
    const admitted: string[] = [];
    for (const file of kustomization.resources) {
      for (const doc of exampleDocs(file)) {
        const kind = doc.kind as string;
        if (kind === 'KubeDirectorApp') {
          const a = inNs(doc as unknown as KDApp);
          expect(await validateApp({ operation: 'CREATE', object: a }, w, OPTS)).toEqual({ errors: [], warnings: [] });
          w.addApp(a);
        } else if (kind === 'KubeDirectorCluster') {
          const c = inNs(doc as unknown as KDCluster);
          const result = await validateCluster({ operation: 'CREATE', object: c }, w, OPTS);
          expect({ name: c.metadata.name, errors: result.errors.map(formatFieldError) }).toEqual({
            name: c.metadata.name,
            errors: [],
          });
          // No status yet in this in-memory world: the only warnings allowed are "no ready members yet".
          for (const warning of result.warnings) expect(warning).toMatch(/has no ready members yet/);
          const gen = decideGenerator('CREATE', c);
          expect(gen.value).toBe(c.spec.connections ? 1 : undefined);
          w.addCluster({
            ...c,
            spec: { ...c.spec, ...(gen.value !== undefined ? { configMetaGenerator: gen.value } : {}) },
          });
        } else if (kind === 'ConfigMap') {
          w.addConfigMap(inNs(doc as unknown as ConfigMapLike));
        } else if (kind === 'Secret') {
          const s = doc as unknown as { metadata: ObjectMeta; stringData: Record<string, string> };
          w.addSecret(inNs({ metadata: s.metadata, keys: Object.keys(s.stringData) }));
        } else {
          throw new Error(`unexpected kind ${kind} in examples/${file}`);
        }
        admitted.push(`${kind}/${(doc.metadata as { name: string }).name}`);
      }
    }
    expect(admitted).toEqual([
      'KubeDirectorApp/jupyter-notebook',
      'KubeDirectorApp/training-engine',
      'KubeDirectorApp/spark-streaming',
      'KubeDirectorApp/kafka',
      'KubeDirectorApp/postgres',
      'ConfigMap/model-prediction',
      'ConfigMap/spark-defaults',
      'Secret/scm-creds',
      'KubeDirectorCluster/kafka-events',
      'KubeDirectorCluster/training-cluster',
      'KubeDirectorCluster/spark-logs-nightly',
      'KubeDirectorCluster/notebook',
      'KubeDirectorCluster/pg-main',
    ]);

    // examples/denied/ is denied, naming the connected cluster's app and the allowed entries.
    const denied = inNs(exampleDocs('denied/notebook-to-postgres.yaml')[0] as unknown as KDCluster);
    const result = await validateCluster({ operation: 'CREATE', object: denied }, w, OPTS);
    expect(result.errors.map(formatFieldError)).toEqual([
      'spec.connections.clusters[0]: cluster "pg-main" uses app "postgres" (category "database", distroID "bitnami/postgresql", version "12.4.0"): connectable_to of app "jupyter-notebook" does not allow it; allowed: {category: "training"}, {category: "streaming", version: ">=2.4 <3"}',
    ]);
  });
});
