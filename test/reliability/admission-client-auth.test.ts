/**
 * Optional client-certificate authentication of the API server to the webhook (--client-ca-file,
 * --client-allowed-names), on a DEDICATED control plane whose kube-apiserver runs with
 * --admission-control-config-file: its AdmissionConfiguration points the webhook host
 * (127.0.0.1:<port>) at a kubeconfig holding a client certificate issued at test time with
 * test-pki.ts createClientCert (CN kube-apiserver), as the Kubernetes docs describe
 * ("Authenticate apiservers"). Requests through the API server are admitted; a direct request without
 * a client certificate, with one from another CA, or with a name not on the allow-list is refused
 * before any HTTP is spoken.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import tls from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { createCA, type CertPair } from '@kd-connections/certs';
import { createClientCert } from '../support/test-pki.js';
import { startControlPlane, type ControlPlane } from '../controlplane/controlplane.js';
import { freePort } from '../controlplane/net.js';
import type { TestEnv } from '../support/cluster.js';
import { eventually } from '../support/processes.js';
import { startAdmission, type RunningAdmission } from '../support/services.js';
import { benchEnv } from '../bench/env.js';
import { installCrds } from '../support/crds.js';
import {
  registerWebhooks,
  type Registration,
  waitUntilLive,
  WEBHOOK_NAMES,
} from '../support/webhook-configurations.js';

const dir = mkdtempSync(join(tmpdir(), 'kd-client-auth-'));
const file = (name: string, content: string, mode = 0o600) => {
  const p = join(dir, name);
  writeFileSync(p, content, { mode });
  return p;
};
const clientCa = createCA({ commonName: 'kd-test-webhook-client-ca' });
const apiserverClient = createClientCert({ ca: clientCa, commonName: 'kube-apiserver' });
const otherCa = createCA({ commonName: 'kd-test-other-ca' });
const foreignClient = createClientCert({ ca: otherCa, commonName: 'kube-apiserver' });
const wrongName = createClientCert({ ca: clientCa, commonName: 'intruder' });

let port: number;
let cp: ControlPlane;
let env: TestEnv;
let svc: RunningAdmission;
let hooks: Registration | undefined;

beforeAll(async () => {
  port = await freePort();
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  // The kubeconfig the API server uses towards webhooks: the user is matched by host:port.
  const webhookKubeconfig = file(
    'webhook-kubeconfig.json',
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      users: [
        {
          name: `127.0.0.1:${port}`,
          user: {
            'client-certificate-data': b64(apiserverClient.certPem),
            'client-key-data': b64(apiserverClient.keyPem),
          },
        },
      ],
    }),
  );
  const plugin = (name: string) => ({
    name,
    configuration: {
      apiVersion: 'apiserver.config.k8s.io/v1',
      kind: 'WebhookAdmissionConfiguration',
      kubeConfigFile: webhookKubeconfig,
    },
  });
  const admissionConfig = file(
    'admission-config.json',
    JSON.stringify({
      apiVersion: 'apiserver.config.k8s.io/v1',
      kind: 'AdmissionConfiguration',
      plugins: [plugin('ValidatingAdmissionWebhook'), plugin('MutatingAdmissionWebhook')],
    }),
  );
  cp = await startControlPlane({
    apiserverFlags: [`--admission-control-config-file=${admissionConfig}`],
    audit: false,
  });
  env = await benchEnv(cp, `client-auth-${Math.random().toString(36).slice(2, 8)}`);
  await installCrds(env);

  svc = await startAdmission(
    env,
    [`--client-ca-file=${file('client-ca.crt', clientCa.certPem)}`, '--client-allowed-names=kube-apiserver'],
    // Its /readyz needs a client certificate too: waited for below.
    { port, waitReady: false },
  );
  await svc.waitForLog((l) => l.msg === 'listening');
  // Probes need a client certificate too (the flag's help says so: use tcpSocket probes in a pod).
  await eventually('admission /readyz', async () => (await get('/readyz', apiserverClient)).status === 200, 60_000);
  hooks = await registerWebhooks(env, svc);
}, 180_000);

afterAll(async () => {
  await hooks?.remove();
  await svc?.stop();
  await cp?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A GET straight to the service with (or without) a client certificate. */
function get(path: string, client?: CertPair): Promise<{ status: number; body: string }> {
  return new Promise((ok, fail) => {
    https
      .get(
        {
          host: '127.0.0.1',
          port,
          path,
          ca: cp.webhookCaPem,
          cert: client?.certPem,
          key: client?.keyPem,
          agent: false,
        },
        (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => ok({ status: res.statusCode ?? 0, body }));
        },
      )
      .on('error', fail);
  });
}

/** A TLS connection that sends nothing: how the server ends it (an alert, a close) or that it stays open. */
function connectOnly(client?: CertPair): Promise<{ error: string } | { closedByServer: true } | { open: true }> {
  return new Promise((ok) => {
    const s = tls.connect({ host: '127.0.0.1', port, ca: cp.webhookCaPem, cert: client?.certPem, key: client?.keyPem });
    s.resume();
    let error: string | undefined;
    s.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    s.on('close', () => ok(error ? { error } : { closedByServer: true }));
    setTimeout(() => {
      if (s.destroyed) return;
      s.destroy();
      ok({ open: true });
    }, 2000);
  });
}

describe('client-certificate authentication of the API server', () => {
  it('the API server authenticates with its client certificate: denials and mutations through it work', async () => {
    // Proven by the marker requests: a dry-run kdcluster denied by the validating webhook, and a
    // kdcluster and a member pod mutated by the mutating ones.
    await waitUntilLive(env, 60_000);
    const custom = env.kc.makeApiClient(CustomObjectsApi);
    const created = (await custom.createNamespacedCustomObject({
      group: 'kubedirector.hpe.com',
      version: 'v1beta1',
      plural: 'kubedirectorclusters',
      namespace: env.namespace,
      body: {
        apiVersion: 'kubedirector.hpe.com/v1beta1',
        kind: 'KubeDirectorCluster',
        metadata: { name: 'authenticated' },
        spec: { app: 'marker-app', roles: [{ id: 'a', members: 1 }], connections: { configmaps: ['marker-cm'] } },
      },
    })) as { spec: { configMetaGenerator?: number } };
    expect(created.spec.configMetaGenerator).toBe(1);
    const denied = await env.kubectl(['create', '--dry-run=server', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'kubedirector.hpe.com/v1beta1',
        kind: 'KubeDirectorCluster',
        metadata: { name: 'denied' },
        spec: { app: 'no-such-app', roles: [{ id: 'a', members: 1 }] },
      }),
    });
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(`admission webhook "${WEBHOOK_NAMES.validateCluster}" denied the request`);
    expect(denied.stderr).toContain('app "no-such-app" not found');
    // The name check let every API server connection through.
    expect(svc.logs().filter((l) => l.msg === 'client certificate name not allowed; connection closed')).toEqual([]);
  });

  it('a request without a client certificate is refused in the TLS handshake', async () => {
    // TLS 1.3: the server's alert arrives just after the client's side of the handshake.
    expect(await connectOnly()).toEqual({ error: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED' });
    await expect(get('/validate-kdcluster')).rejects.toThrow();
  });

  it('a client certificate from another CA is refused by the TLS layer', async () => {
    // Node verifies the chain when the handshake completes and closes the connection at once: the
    // HTTP server never sees it.
    expect(await connectOnly(foreignClient)).toEqual({ closedByServer: true });
    await expect(get('/healthz', foreignClient)).rejects.toThrow();
  });

  it('a certificate from the right CA but a name off the allow-list is cut off before any request', async () => {
    expect(await connectOnly(wrongName)).toEqual({ closedByServer: true });
    await expect(get('/healthz', wrongName)).rejects.toThrow(/ECONNRESET|socket hang up|EPIPE/);
    const refusal = await eventually('the refusal is logged', () =>
      svc.logs().find((l) => l.msg === 'client certificate name not allowed; connection closed'),
    );
    expect(refusal).toMatchObject({ level: 'warn', names: ['intruder'] });
    // The allowed certificate still works directly, and its connection stays open until closed.
    expect(await connectOnly(apiserverClient)).toEqual({ open: true });
    expect((await get('/healthz', apiserverClient)).status).toBe(200);
    expect(svc.logs().filter((l) => l.level === 'error')).toEqual([]);
  });
});
