/**
 * The CRDs (charts/kd-connections/files/crds, the single copy) and the shared library state some rules twice —
 * once as CEL/schema for the API server, once in TypeScript for the webhook. They must agree.
 */
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { DNS1123_SUBDOMAIN_MAX, invalidObjectName } from '../src/domain/names.js';
import { API_VERSION, GROUP, KDAPP_PLURAL, KDCLUSTER_PLURAL, KIND_OF_LIST, VERSION } from '../src/domain/types.js';

const crd = (file: string): any =>
  parse(
    readFileSync(fileURLToPath(new URL(`../../charts/kd-connections/files/crds/${file}`, import.meta.url)), 'utf8'),
  );
const clusterCrd = crd('kubedirector.hpe.com_kubedirectorclusters.yaml');
const appCrd = crd('kubedirector.hpe.com_kubedirectorapps.yaml');
const clusterSchema = clusterCrd.spec.versions[0].schema.openAPIV3Schema;
const connections = clusterSchema.properties.spec.properties.connections.properties;

describe('CRDs and the shared library agree', () => {
  it('on group, version and plurals', () => {
    for (const [c, plural] of [
      [clusterCrd, KDCLUSTER_PLURAL],
      [appCrd, KDAPP_PLURAL],
    ] as const) {
      expect(c.spec.group).toBe(GROUP);
      expect(c.spec.versions.map((v: any) => v.name)).toEqual([VERSION]);
      expect(c.spec.names.plural).toBe(plural);
      expect(c.metadata.name).toBe(`${plural}.${GROUP}`);
    }
    expect(API_VERSION).toBe('kubedirector.hpe.com/v1beta1');
  });

  it('on the connection name rule: the CEL regex accepts exactly what invalidObjectName accepts', () => {
    const item = connections.clusters.items;
    expect(connections.configmaps.items).toEqual(item);
    expect(connections.secrets.items).toEqual(item);
    expect(item.maxLength).toBe(DNS1123_SUBDOMAIN_MAX);
    const rule: string = item['x-kubernetes-validations'][0].rule;
    const m = /^self\.matches\('(.*)'\)$/.exec(rule);
    expect(m).not.toBeNull();
    // CEL single-quoted string: "\\" is one backslash.
    const cel = new RegExp(m![1]!.replace(/\\\\/g, '\\'));
    const name = fc.string({ unit: fc.constantFrom('a', 'z', '0', '9', '-', '.', 'A', '_', '/'), maxLength: 12 });
    fc.assert(
      fc.property(name, (n) => {
        expect(cel.test(n)).toBe(invalidObjectName(n) === undefined);
      }),
      { numRuns: 2000 },
    );
    for (const n of ['a.b', 'a..b', 'a-', 'ns/a', '']) expect(cel.test(n)).toBe(invalidObjectName(n) === undefined);
  });

  it('on the list kinds, connection states and the app catalogs', () => {
    const status = clusterSchema.properties.status.properties;
    expect(status.connections.items.properties.kind.enum).toEqual(Object.values(KIND_OF_LIST));
    expect(status.connections.items.properties.state.enum).toEqual([
      'Connected',
      'Missing',
      'NotConnectable',
      'Unlabeled',
    ]);
    expect(clusterSchema.properties.spec.properties.appCatalog.enum).toEqual(['local', 'system']);
    for (const list of Object.keys(KIND_OF_LIST)) {
      expect(connections[list]['x-kubernetes-list-type']).toBe('set');
      expect(connections[list].maxItems).toBe(100);
    }
  });

  it('on the fields the printer columns and the status writer use', () => {
    const columns = clusterCrd.spec.versions[0].additionalPrinterColumns.map((c: any) => [c.name, c.jsonPath]);
    expect(columns).toEqual([
      ['App', '.spec.app'],
      ['Connections', '.status.connectionsSummary'],
      ['Generator', '.spec.configMetaGenerator'],
      ['Synced', '.status.lastConfigMetaGenerator'],
      ['Ready', '.status.membersSummary'],
      ['Age', '.metadata.creationTimestamp'],
    ]);
    const status = clusterSchema.properties.status.properties;
    for (const f of [
      'connectionsSummary',
      'membersSummary',
      'lastConfigMetaGenerator',
      'connectionsHash',
      'observedGeneration',
    ])
      expect(status[f]).toBeDefined();
    expect(Object.keys(status.members.properties)).toEqual(['total', 'ready', 'synced']);
    expect(clusterCrd.spec.versions[0].subresources).toEqual({ status: {} });
  });
});
