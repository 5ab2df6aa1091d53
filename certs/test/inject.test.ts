/** The caBundle JSON Patch and its application, against an in-memory API (the cluster test uses the real one). */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { createCA, createServingCert, type CertPair } from '../src/generate.js';
import { caBundlePatch, encodeCABundle, injectCABundle, type WebhookConfigurationView } from '../src/inject.js';
import { CertificateError } from '../src/inspect.js';
import { KubeApiError } from '@kd-connections/shared/runtime';
import { fakeClient } from './fake-client.js';

const BITS = 1024; // key size is irrelevant here
let ca: CertPair;
let oldCa: CertPair;
let leaf: CertPair;

beforeAll(() => {
  ca = createCA({ keyBits: BITS });
  oldCa = createCA({ keyBits: BITS });
  leaf = createServingCert({ ca, dnsNames: ['x.example.com'], keyBits: BITS });
});

const config = (...names: string[]): WebhookConfigurationView => ({
  metadata: { name: 'c' },
  webhooks: names.map((name) => ({
    name,
    clientConfig: { url: `https://127.0.0.1:1/${name}` } as { caBundle?: string },
  })),
});

describe('encodeCABundle', () => {
  it('is the base64 of the PEM certificates, old and new CA alike', () => {
    const { caBundle, cas } = encodeCABundle(ca.certPem + oldCa.certPem);
    expect(cas).toHaveLength(2);
    const decoded = Buffer.from(caBundle, 'base64').toString('utf8');
    expect(decoded).toBe((ca.certPem + oldCa.certPem).replace(/\r\n/g, '\n'));
  });

  it('refuses a private key and a certificate that is not a CA', () => {
    expect(() => encodeCABundle(ca.certPem + ca.keyPem, 'ca.crt')).toThrow(/found a RSA PRIVATE KEY block/);
    expect(() => encodeCABundle(leaf.certPem, 'ca.crt')).toThrow(
      new CertificateError('ca.crt: "x.example.com" is not a CA certificate (basicConstraints cA is not set)'),
    );
  });
});

describe('caBundlePatch', () => {
  it('tests each name at its index and sets only clientConfig.caBundle', () => {
    expect(caBundlePatch(['a.example.com', 'b.example.com'], 'Q0E=')).toEqual([
      { op: 'test', path: '/webhooks/0/name', value: 'a.example.com' },
      { op: 'add', path: '/webhooks/0/clientConfig/caBundle', value: 'Q0E=' },
      { op: 'test', path: '/webhooks/1/name', value: 'b.example.com' },
      { op: 'add', path: '/webhooks/1/clientConfig/caBundle', value: 'Q0E=' },
    ]);
  });
});

describe('injectCABundle', () => {
  const ref = { kind: 'validating' as const, name: 'c' };

  it('sets the bundle on every webhook and leaves the rest alone', async () => {
    const client = fakeClient({ 'validating/c': config('a', 'b') });
    const r = await injectCABundle(client, ref, 'Q0E=');
    expect(r).toEqual({ ref, changed: ['a', 'b'], unchanged: [] });
    expect(client.objects.get('validating/c')).toEqual({
      metadata: { name: 'c' },
      webhooks: [
        { name: 'a', clientConfig: { url: 'https://127.0.0.1:1/a', caBundle: 'Q0E=' } },
        { name: 'b', clientConfig: { url: 'https://127.0.0.1:1/b', caBundle: 'Q0E=' } },
      ],
    });
  });

  it('does not write when every webhook already has the bundle', async () => {
    const client = fakeClient({ 'validating/c': config('a') });
    await injectCABundle(client, ref, 'Q0E=');
    const r = await injectCABundle(client, ref, 'Q0E=');
    expect(r).toEqual({ ref, changed: [], unchanged: ['a'] });
    expect(client.patches).toHaveLength(1);
  });

  it('writes from a fresh read when the webhooks are reordered between read and write', async () => {
    const client = fakeClient({ 'validating/c': config('a', 'b', 'c') });
    client.afterRead = (k) => {
      client.afterRead = undefined;
      client.objects.get(k)!.webhooks!.reverse();
    };
    const r = await injectCABundle(client, ref, 'Q0E=');
    expect(r.changed).toEqual(['c', 'b', 'a']);
    // The first write tested the names it read and was refused whole; the second one went through.
    expect(client.patches).toHaveLength(2);
    const now = client.objects.get('validating/c')!.webhooks!;
    expect(now.map((w) => [w.name, w.clientConfig?.caBundle])).toEqual([
      ['c', 'Q0E='],
      ['b', 'Q0E='],
      ['a', 'Q0E='],
    ]);
  });

  it('gives up, naming the configuration, when every attempt loses the race', async () => {
    const client = fakeClient({ 'validating/c': config('a', 'b') });
    client.afterRead = (k) => void client.objects.get(k)!.webhooks!.reverse();
    await expect(injectCABundle(client, ref, 'Q0E=')).rejects.toThrow(
      'ValidatingWebhookConfiguration c: cannot write, changed by another writer 4 times: 422',
    );
    expect(client.patches).toHaveLength(4);
    expect(client.objects.get('validating/c')!.webhooks!.map((w) => w.clientConfig?.caBundle)).toEqual([
      undefined,
      undefined,
    ]);
  });

  it('says not found for a missing configuration', async () => {
    await expect(injectCABundle(fakeClient({}), { kind: 'mutating', name: 'gone' }, 'Q0E=')).rejects.toThrow(
      'MutatingWebhookConfiguration gone not found',
    );
  });

  it('reports other API errors by their Status message', async () => {
    const client = fakeClient({ 'validating/c': config('a') });
    client.patch = async () => {
      throw new KubeApiError(403, 'Forbidden', 'PATCH /apis/…/c: 403 Forbidden forbidden: no patch for you');
    };
    await expect(injectCABundle(client, ref, 'Q0E=')).rejects.toThrow(
      'ValidatingWebhookConfiguration c: cannot write: PATCH /apis/…/c: 403 Forbidden forbidden: no patch for you',
    );
  });
});
