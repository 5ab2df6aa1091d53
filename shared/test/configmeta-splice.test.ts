/**
 * The in-pod assembly of KubeDirector's document: the planner's pod annotations (public, no value) and
 * private Secret (the sections) join, through the splice, into exactly KubeDirector's document — the
 * public document with the private sections in place — and only halves of one version join.
 */
import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { assembleDocument, parseSplice, renderSpliced } from '../src/configmeta/configmeta-splice.js';
import { ANNOTATION_CONFIGMETA_SPLICE, privateSectionKey, SPLICE_SECTIONS } from '../src/domain/guestconfig-layout.js';
import { membersOf } from '../src/configmeta/members.js';
import { deliveryOutcome, planReconcile, planStatus, type Observation } from '../src/plan/plan-reconcile.js';
import { LABEL_PRIVATE_CONFIGMETA_OF } from '../src/plan/plan-private-secret.js';
import { resolveConnections } from '../src/plan/resolve-connections.js';
import { trimPod } from '../src/configmeta/trim-object.js';
import { ANNOTATION_CONFIGMETA } from '../src/domain/types.js';
import { NS, SYSTEM_NS } from './fixtures.js';
import { SECRET_PLAIN, scenario } from './scenario.js';

const KEY = new Uint8Array(32).fill(7);
const OPTS = { systemNamespace: SYSTEM_NS, privateKey: KEY };

async function observe(): Promise<Observation> {
  const s = scenario();
  const own = { app: s.app, namespace: NS };
  const resolved = await resolveConnections(s.notebook, own, s.world, OPTS);
  const pods = (await s.world.podsOf(NS, 'notebook')).map((p) => trimPod(p as never));
  const members = membersOf(s.notebook, own.app, pods);
  return { cluster: s.notebook, own, resolved, members, pods, now: '2026-12-02T12:00:00.000Z' };
}

/** The annotation values and the Secret data a plan writes. */
function written(plan: ReturnType<typeof planReconcile>) {
  const ann = (ops: { path: string; value?: unknown }[], key: string) => {
    for (const op of ops) {
      const v = op.value as Record<string, unknown> | string | undefined;
      if (op.path === '/metadata/annotations' && typeof v === 'object') return v[key] as string | undefined;
      if (op.path === `/metadata/annotations/${key.replace('/', '~1')}`) return v as string;
    }
    return undefined;
  };
  const w = plan.podWrites[0]!;
  if (plan.privateSecret?.kind !== 'create') throw new Error('expected the private Secret to be created');
  const data = plan.privateSecret.body.data;
  const dec = (k: string) => (data[k] === undefined ? undefined : Buffer.from(data[k]!, 'base64'));
  return {
    text: ann(w.ops, ANNOTATION_CONFIGMETA)!,
    splice: ann(w.ops, ANNOTATION_CONFIGMETA_SPLICE)!,
    version: dec('version')!.toString(),
    sections: Object.fromEntries(
      SPLICE_SECTIONS.flatMap((s) => (dec(privateSectionKey(s)) ? [[s, dec(privateSectionKey(s))!]] : [])),
    ),
    privateDoc: JSON.parse(dec('priv_configmeta.json')!.toString()) as Record<string, unknown>,
  };
}

describe('the splice', () => {
  it('joins the annotation and the private Secret into the public document with the private sections', async () => {
    const w = written(planReconcile(await observe(), OPTS));
    // The annotation carries no value.
    expect(w.text).not.toContain(Buffer.from(SECRET_PLAIN.token).toString('base64'));
    expect(w.splice).toContain(w.version);
    const doc = assembleDocument(Buffer.from(w.text), w.splice, { version: w.version, sections: w.sections });
    expect(doc).toBeDefined();
    const parsed = JSON.parse(doc!.toString()) as Record<string, unknown>;
    // Exactly the public document with what root would merge from the private file (configcli's dict.update).
    expect(parsed).toEqual({ ...(JSON.parse(w.text) as Record<string, unknown>), ...w.privateDoc });
    expect(Object.keys(parsed)).toEqual(Object.keys(JSON.parse(w.text) as object));
    expect(doc!.toString()).toContain(Buffer.from(SECRET_PLAIN.token).toString('base64'));
  });

  it('never joins halves of different versions', async () => {
    const w = written(planReconcile(await observe(), OPTS));
    expect(assembleDocument(Buffer.from(w.text), w.splice, { version: 'f'.repeat(32), sections: w.sections })).toBe(
      undefined,
    );
    expect(assembleDocument(Buffer.from(w.text), w.splice, { version: w.version, sections: {} })).toBe(undefined);
  });

  it('the version is a keyed MAC: not a plain hash of the values, and another key gives another version', async () => {
    const o = await observe();
    const a = written(planReconcile(o, OPTS));
    const b = written(planReconcile(o, { ...OPTS, privateKey: new Uint8Array(32).fill(9) }));
    expect(a.version).toMatch(/^[0-9a-f]{32}$/);
    expect(b.version).not.toBe(a.version);
    for (const v of Object.values(SECRET_PLAIN))
      expect(a.splice).not.toContain(createHash('sha256').update(v).digest('hex').slice(0, 32));
  });

  it('offsets are bytes of UTF-8 text, and bad splices are refused with what is wrong', () => {
    const s = renderSpliced({ a: 'é✓', connections: { x: 1 }, z: 'ü' }, { connections: 9 }, 'ab'.repeat(8));
    const out = assembleDocument(Buffer.from(s.text), s.splice, {
      version: 'ab'.repeat(8),
      sections: { connections: Buffer.from('{"x":"v"}') },
    });
    expect(out!.toString()).toBe('{"a":"é✓","connections":{"x":"v"},"z":"ü"}');
    // A private section of another length than the annotation names is never joined (cut short, edited).
    expect(
      assembleDocument(Buffer.from(s.text), s.splice, {
        version: 'ab'.repeat(8),
        sections: { connections: Buffer.from('{"x":"vv"}') },
      }),
    ).toBeUndefined();
    expect(() => renderSpliced({ a: 1 }, { connections: 2 }, 'ab'.repeat(8))).toThrow(/no top-level connections/);
    expect(parseSplice('2 x')).toBeInstanceOf(Error);
    expect(String(parseSplice('1 v secrets 1 2 3'))).toMatch(/unknown section secrets/);
    expect(String(parseSplice('1 v connections 5 2 1'))).toMatch(/bad range/);
    expect(String(parseSplice('1 v connections 1 2 -1'))).toMatch(/bad length/);
  });
});

describe("a Secret of the private Secret's name that someone else made", () => {
  const foreign = (labels?: Record<string, string>) => ({
    metadata: { name: 'kd-configmeta-private-notebook', namespace: NS, uid: 'uid-x', resourceVersion: '5', labels },
  });

  it('is never written, the pods get the document without a private half, and status and one Warning say why', async () => {
    const o = { ...(await observe()), privateSecret: foreign() };
    const plan = planReconcile(o, OPTS);
    expect(plan.privateSecret).toBeUndefined();
    expect(plan.foreignPrivateSecret).toContain(
      `Secret ${NS}/kd-configmeta-private-notebook is not this kdcluster's private configmeta Secret (it has no label`,
    );
    // No splice: the sidecar joins nothing and installs no private file from that Secret.
    const ops = plan.podWrites[0]!.ops;
    const annotations = ops.find((op) => op.path === '/metadata/annotations') as { value: Record<string, string> };
    expect(annotations.value[ANNOTATION_CONFIGMETA_SPLICE]).toBe('');
    expect(JSON.stringify(ops)).not.toContain(Buffer.from(SECRET_PLAIN.token).toString('base64'));

    const { delivery, events } = deliveryOutcome(plan, { written: [plan.podWrites[0]!.pod], failed: {} }, o);
    expect(events.filter((e) => e.type === 'Warning')).toEqual([
      expect.objectContaining({ reason: 'PrivateSecretNotOwned', note: plan.foreignPrivateSecret }),
    ]);
    const status = (
      planStatus(o.cluster, o, undefined, delivery).find((op) => op.path === '/status') as {
        value: { conditions: { type: string; status: string; reason: string }[] };
      }
    ).value;
    expect(status.conditions.find((c) => c.type === 'ConfigMetaSynced')).toMatchObject({
      status: 'False',
      reason: 'PrivateSecretNotOwned',
    });
    expect(status.conditions.find((c) => c.type === 'Ready')).toMatchObject({ status: 'False' });
    expect(status.conditions.find((c) => c.type === 'Stalled')).toMatchObject({ status: 'True' });

    // Status already says it (a retry, a restart): no second Warning.
    const again = { ...o, cluster: { ...o.cluster, status: status as never } };
    expect(deliveryOutcome(planReconcile(again, OPTS), { written: [], failed: {} }, again).events).toEqual([]);
  });

  it('one labelled for this cluster but not controlled by it is not ours either', async () => {
    const o = { ...(await observe()), privateSecret: foreign({ [LABEL_PRIVATE_CONFIGMETA_OF]: 'notebook' }) };
    const plan = planReconcile(o, OPTS);
    expect(plan.privateSecret).toBeUndefined();
    expect(plan.foreignPrivateSecret).toContain('not controlled by a KubeDirectorCluster');
  });
});
