/**
 * Issue 26 item 1, default (`document`) mode: connected Secret values reach the REAL configcli in a member
 * container, for root and for a non-root user, as KubeDirector renders them (`data` base64 as stored,
 * `metadata.name` and labels Go []byte), assembled inside the pod by the kd-guestconfig sidecar from the
 * annotation (no value) and the cluster's private Secret of the same version. A Secret edit reaches
 * configcli; the edit → visible time is measured (reported, never asserted). Bad input: values that are
 * not UTF-8, a connected Secret deleted, the private Secret made too large — never a partial or mixed
 * document, and an event says what went wrong.
 */
import { afterAll, describe, expect, it, jest } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ANNOTATION_CONFIGMETA,
  ANNOTATION_CONFIGMETA_SPLICE,
  privateConfigMetaSecretName,
} from '@kd-connections/shared/domain';
import { CONFIGCLI_IMAGE, catIn, configcliGet, configcliImage, configcliValue } from '../images/configcli-image.js';
import { useTestEnv } from '../support/cluster.js';
import { apply, configMap, getJson, kdApp, kdCluster, kubectlOk, secret } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import { importImages, nodeMemberPod, useDeliveryServices, waitPodReady } from './node-support.js';

// Waits below are bounded at up to 120 s each (a loaded 2-core machine): the test's own limit is above them.
jest.setTimeout(300_000);

const env = useTestEnv();
/** The figures file and the oversized patch (too large for a command line). */
const scratch = mkdtempSync(join(tmpdir(), 'kd-secret-values-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const POD = 'sv-controller-0';
const VALUE_1 = 'pw-assembled-first-7d1e';
const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');
const TOKEN = 'connections.secrets.creds.data.token';
const ROOT = { pod: POD };
const APP = { pod: POD, as: 'app' as const };

useDeliveryServices(env, async (node) => {
  await importImages(node, [configcliImage()]);
  await apply(env, [
    kdApp('sv-app', { category: 'notebook', connectable_to: [{ category: 'training' }] }),
    kdApp('sv-trainer', { category: 'training' }),
    configMap('sv-model', { path: '/models/v1' }),
    secret('sv-creds', { token: VALUE_1, user: 'alice' }, 'creds'),
    kdCluster('sv-t', 'sv-trainer'),
    kdCluster('sv', 'sv-app', { clusters: ['sv-t'], configmaps: ['sv-model'], secrets: ['sv-creds'] }),
    nodeMemberPod(POD, 'sv', { containers: [{ name: 'app', image: CONFIGCLI_IMAGE, imagePullPolicy: 'Never' }] }),
  ]);
  await waitPodReady(env, POD);
});

const setToken = (v: string) =>
  kubectlOk(env, ['patch', 'secret', 'sv-creds', '--type=merge', '-p', JSON.stringify({ data: { token: b64(v) } })]);

/** configcli's answer for both users, or undefined while either does not give `want`. */
async function bothGive(key: string, want: string): Promise<true | undefined> {
  for (const where of [ROOT, APP]) {
    const r = await configcliGet(env, where, key);
    if (r.code !== 0 || r.stdout.replace(/\n$/, '') !== want) return undefined;
  }
  return true;
}

/** The document in the container, parsed; always whole JSON (a partial document would throw here). */
const containerDoc = async () => JSON.parse(await catIn(env, ROOT, '/etc/guestconfig/configmeta.json'));

describe('connected Secret values in the container (document mode)', () => {
  it('root and the non-root user read the value with the real configcli, as KubeDirector renders the entry', async () => {
    for (const where of [ROOT, APP]) {
      const who = where === ROOT ? 'root' : 'app';
      expect([who, await configcliValue(env, where, TOKEN)]).toEqual([who, b64(VALUE_1)]);
      expect([who, await configcliValue(env, where, 'connections.secrets.creds.data.user')]).toEqual([
        who,
        b64('alice'),
      ]);
      expect([who, await configcliValue(env, where, 'connections.secrets.creds.metadata.name')]).toEqual([
        who,
        b64('sv-creds'),
      ]);
      // Everything else still answers from the same document.
      expect([who, await configcliValue(env, where, 'connections.configmaps.model.data.path')]).toEqual([
        who,
        '/models/v1',
      ]);
      expect([who, await configcliValue(env, where, 'node.role_id')]).toEqual([who, 'controller']);
      expect([who, (await configcliGet(env, where, 'connections.clusters')).stdout.trim()]).toEqual([who, 'sv-t']);
    }
    const entry = (await containerDoc()).connections.secrets.creds[0];
    expect(entry.redacted).toBeUndefined();
    expect(entry.labels).toEqual({ 'kubedirector.hpe.com/secretType': b64('creds') });
    // The pod annotation (what anyone with pod read sees) has no value; the splice only a keyed version.
    const pod = await getJson(env, ['pod', POD]);
    const ann = pod.metadata.annotations as Record<string, string>;
    expect(ann[ANNOTATION_CONFIGMETA]).not.toContain(b64(VALUE_1));
    expect(ann[ANNOTATION_CONFIGMETA_SPLICE]).toMatch(/^1 [0-9a-f]{32} connections \d+ \d+ \d+$/);
    const listed = await kubectlOk(env, ['get', 'pods,kubedirectorclusters,events,configmaps', '-o', 'json']);
    expect(listed.includes(VALUE_1) || listed.includes(b64(VALUE_1))).toBe(false);
  });

  it('a Secret edit reaches configcli for both users; edit → visible measured over 10 edits', async () => {
    const times: number[] = [];
    for (let i = 0; i < 10; i++) {
      const v = `pw-edit-${i}-${Date.now().toString(36)}`;
      const t0 = Date.now();
      await setToken(v);
      await eventually(`edit ${i} visible to root and app`, () => bothGive(TOKEN, b64(v)), 120_000, 100);
      times.push(Date.now() - t0);
      // Whole, never mixed: the document parses and names one value.
      expect((await containerDoc()).connections.secrets.creds[0].data.token).toBe(b64(v));
    }
    const sorted = [...times].sort((a, b) => a - b);
    const figures = { edits: times.length, p50Ms: sorted[Math.floor(sorted.length / 2)], maxMs: sorted.at(-1), times };
    writeFileSync(join(scratch, 'secret-edit-visible.json'), JSON.stringify(figures));
    console.log(`Secret edit → configcli (root and app) visible: ${JSON.stringify(figures)}`);
    expect(times).toHaveLength(10);
  });

  it('values that are not UTF-8 arrive byte for byte (base64 of the stored bytes, as KubeDirector)', async () => {
    const raw = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x41]);
    await kubectlOk(env, [
      'patch',
      'secret',
      'sv-creds',
      '--type=merge',
      '-p',
      JSON.stringify({ data: { token: raw.toString('base64') } }),
    ]);
    await eventually('binary value visible', () => bothGive(TOKEN, raw.toString('base64')), 120_000, 200);
  });

  it('a private Secret too large to write keeps the last good document and says why in an event', async () => {
    // ~600 KiB of value: the private Secret (which carries it twice, base64) passes the 1 MiB limit.
    const before = await containerDoc();
    const big = Buffer.alloc(600 * 1024, 0x61);
    // Too large for a command line: the patch goes through a file.
    const patchFile = join(scratch, 'big-secret-patch.json');
    writeFileSync(patchFile, JSON.stringify({ data: { token: big.toString('base64') } }));
    await kubectlOk(env, ['patch', 'secret', 'sv-creds', '--type=merge', '--patch-file', patchFile]);
    const ev = await eventually(
      'PrivateConfigMetaFailed event',
      async () => {
        const list = await getJson(env, ['events.events.k8s.io']);
        return (list.items as { reason?: string; note?: string }[]).find((e) => e.reason === 'PrivateConfigMetaFailed');
      },
      120_000,
      500,
    );
    expect(ev.note).toContain(privateConfigMetaSecretName('sv'));
    // The pod's annotation moved on (a new version), the container did not: the last whole document stays.
    for (let i = 0; i < 5; i++) {
      expect(await containerDoc()).toEqual(before);
    }
    const logs = await kubectlOk(env, ['logs', POD, '-c', 'kd-guestconfig']);
    expect(logs).toMatch(/waiting for the private Secret of version/);
    await setToken(VALUE_1);
    await eventually('back to a value that fits', () => bothGive(TOKEN, b64(VALUE_1)), 120_000, 200);
  });

  it('a connected Secret deleted: the entry leaves the document whole, and status says the connection is missing', async () => {
    await kubectlOk(env, ['delete', 'secret', 'sv-creds']);
    await eventually(
      'entry gone for both users',
      async () => {
        for (const where of [ROOT, APP]) {
          const r = await configcliGet(env, where, TOKEN);
          if (r.code === 0) return undefined;
        }
        return true;
      },
      120_000,
      200,
    );
    const doc = await containerDoc();
    expect(doc.connections.secrets.creds).toBeUndefined();
    expect(await configcliValue(env, ROOT, 'connections.configmaps.model.data.path')).toBe('/models/v1');
    const cluster = await getJson(env, ['kubedirectorcluster', 'sv']);
    expect(JSON.stringify(cluster.status ?? {})).toContain('sv-creds');
  });
});
