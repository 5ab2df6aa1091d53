/**
 * SCHEMA_LIMITS (what the webhooks check first) and the CRD files (what the API server checks) state the
 * same limits; the webhook's own checks refuse an oversized field before parsing it, and the version
 * memos stay bounded in bytes whatever texts they are asked about.
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { BoundedMemo } from '../src/primitives/bounded-memo.js';
import { parseVersionSpec, versionMatches, versionMemoSizes } from '../src/domain/connectable.js';
import { SCHEMA_LIMITS } from '../src/domain/schema-limits.js';
import { checkConnectableTo, validateApp } from '../src/domain/validate-kdapp.js';
import { lookupFreeErrors, validateCluster } from '../src/domain/validate-kdcluster.js';
import type { KDApp, KDCluster } from '../src/domain/types.js';

const crd = (file: string): any =>
  parse(
    readFileSync(fileURLToPath(new URL(`../../charts/kd-connections/files/crds/${file}`, import.meta.url)), 'utf8'),
  );
const appSpec = crd('kubedirector.hpe.com_kubedirectorapps.yaml').spec.versions[0].schema.openAPIV3Schema.properties
  .spec.properties;
const clusterSpec = crd('kubedirector.hpe.com_kubedirectorclusters.yaml').spec.versions[0].schema.openAPIV3Schema
  .properties.spec.properties;

describe('SCHEMA_LIMITS agree with the CRDs', () => {
  it('kdapp fields and connectable_to', () => {
    const entry = appSpec.connectable_to.items.properties;
    expect(appSpec.connectable_to.maxItems).toBe(SCHEMA_LIMITS.connectableToItems);
    expect([appSpec.category.maxLength, entry.category.maxLength]).toEqual([
      SCHEMA_LIMITS.category,
      SCHEMA_LIMITS.category,
    ]);
    expect([appSpec.distroID.maxLength, entry.distroID.maxLength]).toEqual([
      SCHEMA_LIMITS.distroID,
      SCHEMA_LIMITS.distroID,
    ]);
    expect([appSpec.version.maxLength, entry.version.maxLength]).toEqual([
      SCHEMA_LIMITS.version,
      SCHEMA_LIMITS.version,
    ]);
  });

  it('kdcluster app and connection lists', () => {
    expect(clusterSpec.app.maxLength).toBe(SCHEMA_LIMITS.name);
    for (const list of ['clusters', 'configmaps', 'secrets']) {
      expect(clusterSpec.connections.properties[list].maxItems).toBe(SCHEMA_LIMITS.connectionItems);
      expect(clusterSpec.connections.properties[list].items.maxLength).toBe(SCHEMA_LIMITS.name);
    }
  });
});

/** A lookup that fails the test if asked anything. */
const noLookups = new Proxy(
  {},
  {
    get: (_t, name) => () => {
      throw new Error(`looked up ${String(name)}`);
    },
  },
) as never;
const opts = { systemNamespace: 'kd-system', secretConnections: true };

describe('oversized input is refused before any work', () => {
  it('a connectable_to version longer than the schema allows is refused by length, not parsed', () => {
    const before = versionMemoSizes();
    const version = `>=1.0.0${' '.repeat(1_000_000)}<2.0.0`;
    expect(checkConnectableTo([{ version }])).toEqual([
      {
        field: 'spec.connectable_to[0].version',
        message: `has ${version.length} characters; at most 128 are allowed (the CRD schema's maxLength)`,
      },
    ]);
    expect(versionMemoSizes()).toEqual(before);
  });

  it('more connectable_to entries than the schema allows are refused as a whole', () => {
    const errors = checkConnectableTo(Array.from({ length: 65 }, () => ({ category: 'x' })));
    expect(errors).toEqual([
      { field: 'spec.connectable_to', message: "has 65 entries; at most 64 are allowed (the CRD schema's maxItems)" },
    ]);
  });

  it("the app's own category, distroID and version are length-checked", async () => {
    const app: KDApp = {
      metadata: { name: 'a', namespace: 'ns' },
      spec: { category: 'c'.repeat(64), distroID: 'd'.repeat(254), version: '1'.repeat(129) },
    } as KDApp;
    const { errors } = await validateApp({ operation: 'UPDATE', object: app }, noLookups, opts);
    expect(errors.map((e) => e.field)).toEqual(['spec.category', 'spec.distroID', 'spec.version']);
  });

  it('a kdcluster with more connections than the schema allows is refused without a lookup', async () => {
    const names = (n: number) => Array.from({ length: n }, (_, i) => `n-${i}`);
    const object = {
      metadata: { name: 'c', namespace: 'ns' },
      spec: { app: 'a', connections: { configmaps: names(5001), secrets: names(101), clusters: names(100) } },
    } as KDCluster;
    const expected = [
      {
        field: 'spec.connections.configmaps',
        message: "has 5001 entries; at most 100 are allowed (the CRD schema's maxItems)",
      },
      {
        field: 'spec.connections.secrets',
        message: "has 101 entries; at most 100 are allowed (the CRD schema's maxItems)",
      },
    ];
    expect((await validateCluster({ operation: 'CREATE', object }, noLookups, opts)).errors).toEqual(expected);
    expect(lookupFreeErrors({ operation: 'CREATE', object })).toEqual(expected);
  });
});

describe('version memos are bounded in bytes', () => {
  it('many distinct texts within the schema limit keep the memos under their byte bound', () => {
    for (let i = 0; i < 20_000; i++) {
      const spec = `>=${i}.0.0 <${i + 1}.0.0 ${'x'.repeat(0)}`.padEnd(120, ' ');
      parseVersionSpec(spec);
      versionMatches(spec, `${i}.5.0`);
    }
    // Three memos of 1 + 1 + 4 MiB at most (counted bytes).
    expect(versionMemoSizes().bytes).toBeLessThanOrEqual(6 * 1024 * 1024);
  });

  it('BoundedMemo keeps nothing longer than its key limit and starts over past its byte bound', () => {
    const memo = new BoundedMemo<number>(100, 1000, 10, 0);
    expect(memo.get('x'.repeat(11), (k) => k.length)).toBe(11);
    expect(memo.size).toBe(0);
    for (let i = 0; i < 60; i++) memo.get(`k${String(i).padStart(8, '0')}`, () => i); // 20 bytes each
    expect(memo.keptBytes).toBeLessThanOrEqual(1000);
    expect(memo.size).toBeLessThanOrEqual(50);
    let computed = 0;
    memo.get('again', () => ++computed);
    memo.get('again', () => ++computed);
    expect(computed).toBe(1);
  });
});
