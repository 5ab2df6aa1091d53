/**
 * The queries KubeDirector apps make with configcli, answered by a reader that follows configcli's rules
 * (configcli-reader.ts) against the documents kd-connections renders.
 */
import { describe, expect, it } from '@jest/globals';
import { membersOf } from '../src/configmeta/members.js';
import { renderConfigMetaForMembers, renderConnections } from '../src/configmeta/render-configmeta.js';
import { ConfigcliKeyError, configcliGet, type Json } from './configcli-reader.js';
import { cluster, configMap, exampleApps, pod } from './fixtures.js';
import { render, scenario } from './scenario.js';

async function notebookDoc(): Promise<Json> {
  const { docs } = await render(scenario());
  return JSON.parse(docs.get('kdss-nb-0')!) as Json;
}

const TR = 'kdhs-tr.ml.svc.cluster.local';

describe('configcli rules (the reader itself)', () => {
  const doc: Json = {
    a: { b: 'x', list: ['p', 'q'], ref: { bdvlibrefkey: ['target'] } },
    target: { deep: { v: 1 } },
    merged: [
      { k: '1', only1: 'a' },
      { k: '2', only2: 'b' },
    ],
    nothing: null,
  };

  it('splits on ".", answers values as they are and maps with their keys', () => {
    expect(configcliGet(doc, 'a.b')).toBe('x');
    expect(configcliGet(doc, 'a.list')).toEqual(['p', 'q']);
    expect(configcliGet(doc, 'a')).toEqual(['b', 'list', 'ref']);
    expect(configcliGet(doc, 'nothing')).toBeNull();
  });

  it('follows bdvlibrefkey from the root, with the remaining tokens', () => {
    expect(configcliGet(doc, 'a.ref')).toEqual(['deep']);
    expect(configcliGet(doc, 'a.ref.deep.v')).toBe(1);
  });

  it('merges a list of maps in order, the last one winning', () => {
    expect(configcliGet(doc, 'merged')).toEqual(['k', 'only1', 'only2']);
    expect(configcliGet(doc, 'merged.k')).toBe('2');
    expect(configcliGet(doc, 'merged.only1')).toBe('a');
  });

  it('raises KeyError on a miss, below a value, and below null', () => {
    for (const key of ['missing', 'a.missing', 'a.b.c', 'a.ref.deep.nope', 'merged.nope', 'nothing.x']) {
      expect(() => configcliGet(doc, key)).toThrow(ConfigcliKeyError);
    }
  });
});

describe('configcli queries of KubeDirector apps, against kd-connections documents', () => {
  it('node section', async () => {
    const doc = await notebookDoc();
    expect(configcliGet(doc, 'node.role_id')).toBe('controller');
    expect(configcliGet(doc, 'node.id')).toBe('1');
    expect(configcliGet(doc, 'node.fqdn')).toBe('kdss-nb-0.kdhs-nb.ml.svc.cluster.local');
    expect(configcliGet(doc, 'node.nodegroup_id')).toBe('1');
    expect(configcliGet(doc, 'node.distro_id')).toBe('hpecp/jupyter-notebook');
    expect(configcliGet(doc, 'node.depends_on')).toEqual([]);
    expect(() => configcliGet(doc, 'node.block_device_paths')).toThrow(ConfigcliKeyError);
  });

  it('cluster section, own services and nodegroups', async () => {
    const doc = await notebookDoc();
    expect(configcliGet(doc, 'cluster.name')).toBe('notebook');
    expect(configcliGet(doc, 'cluster.isolated')).toBe(false);
    expect(configcliGet(doc, 'cluster.config_metadata.1')).toEqual([]);
    expect(configcliGet(doc, 'nodegroups.1.roles')).toEqual(['controller']);
    expect(configcliGet(doc, 'nodegroups.1.roles.controller.fqdns')).toEqual([
      'kdss-nb-0.kdhs-nb.ml.svc.cluster.local',
    ]);
    expect(configcliGet(doc, 'services')).toEqual(['jupyter-nb', 'ssh']);
    expect(configcliGet(doc, 'services.ssh.1.controller.endpoints')).toEqual([
      '://kdss-nb-0.kdhs-nb.ml.svc.cluster.local:22',
    ]);
    // A service's fqdns are a reference to its role's fqdns.
    expect(configcliGet(doc, 'services.jupyter-nb.1.controller.fqdns')).toEqual([
      'kdss-nb-0.kdhs-nb.ml.svc.cluster.local',
    ]);
    expect(configcliGet(doc, 'distros.hpecp/jupyter-notebook.1.distro_id')).toBe('hpecp/jupyter-notebook');
  });

  it("a connected cluster's nodegroups, services and fqdns", async () => {
    const doc = await notebookDoc();
    expect(configcliGet(doc, 'connections.clusters')).toEqual(['training']);
    expect(configcliGet(doc, 'connections.clusters.training.nodegroups.1.roles')).toEqual([
      'LoadBalancer',
      'RESTServer',
    ]);
    expect(configcliGet(doc, 'connections.clusters.training.nodegroups.1.roles.RESTServer.fqdns')).toEqual([
      `kdss-tr-0.${TR}`,
      `kdss-tr-1.${TR}`,
    ]);
    expect(configcliGet(doc, 'connections.clusters.training.services')).toEqual(['api-server', 'haproxy-stats']);
    expect(configcliGet(doc, 'connections.clusters.training.services.api-server.1.RESTServer.endpoints')).toEqual([
      `http://kdss-tr-0.${TR}:10001`,
      `http://kdss-tr-1.${TR}:10001`,
    ]);
    // The service's references resolve inside the connected cluster (a documented fix).
    expect(configcliGet(doc, 'connections.clusters.training.services.api-server.1.RESTServer.fqdns')).toEqual([
      `kdss-tr-0.${TR}`,
      `kdss-tr-1.${TR}`,
    ]);
    expect(configcliGet(doc, 'connections.clusters.training.services.api-server.1.RESTServer.authToken')).toBe('');
    expect(configcliGet(doc, 'connections.clusters.training.cluster.name')).toBe('training');
    expect(configcliGet(doc, 'connections.clusters.training.distros.hpecp/training-engine.1.distro_id')).toBe(
      'hpecp/training-engine',
    );
  });

  it('connections.configmaps.<type>: the entries merged, the last in spec order winning', () => {
    const [a] = exampleApps().filter((x) => x.metadata.name === 'jupyter-notebook');
    const c = cluster('nb', 'jupyter-notebook', {
      roles: [{ id: 'controller', members: 1 }],
      connections: { configmaps: ['model-b', 'model-a'] },
    });
    const cms = [
      configMap('model-a', 'model', { name: 'resnet', only_a: '1' }),
      configMap('model-b', 'model', { name: 'bert' }),
    ];
    const conns = renderConnections({ clusters: [], configmaps: cms, secrets: [] }, {}, c.spec.connections);
    const members = membersOf(c, a, [pod('nb-0', 'nb', 'controller')]);
    const doc = JSON.parse(renderConfigMetaForMembers(c, a!, members, conns).get('nb-0')!) as Json;
    expect(configcliGet(doc, 'connections.configmaps')).toEqual(['model']);
    expect(configcliGet(doc, 'connections.configmaps.model')).toEqual(['annotations', 'data', 'labels', 'metadata']);
    // model-a is listed last in the spec, so its data wins (whole: the merge is per entry key).
    expect(configcliGet(doc, 'connections.configmaps.model.data.name')).toBe('resnet');
    expect(configcliGet(doc, 'connections.configmaps.model.data.only_a')).toBe('1');
    expect(configcliGet(doc, 'connections.configmaps.model.metadata.name')).toBe('model-a');
    expect(() => configcliGet(doc, 'connections.configmaps.spark')).toThrow(ConfigcliKeyError);
  });

  it('connections.configmaps of the golden scenario; a key with dots is not addressable', async () => {
    const doc = await notebookDoc();
    expect(configcliGet(doc, 'connections.configmaps.model.data.path')).toBe('/models/resnet50/3');
    expect(configcliGet(doc, 'connections.configmaps.model.annotations.ml.example.com/owner')).toEqual([
      'ml.example.com/owner',
    ]);
  });
});
