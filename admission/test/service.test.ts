import { describe, expect, it } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { createCA, createServingCert } from '@kd-connections/certs';
import { silentLogger } from '@kd-connections/shared/runtime';
import { parseConfig, type AdmissionConfig } from '../src/config.js';
import { AdmissionService } from '../src/service.js';
import type { CertificateSink, CertificateSource } from '../src/tls/certificate.js';

/** A source that hands over whatever the test gives it: the shape a Secret-based bootstrapper takes. */
class ManualSource implements CertificateSource {
  sink: CertificateSink | undefined;
  async start(sink: CertificateSink): Promise<void> {
    this.sink = sink;
  }
  stop(): void {}
}

function service(secretConnections: boolean): { svc: AdmissionService; source: ManualSource } {
  const kc = new KubeConfig();
  // Nothing listens there: the caches never sync, which is what readiness must report.
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'http://127.0.0.1:9', skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const config = {
    ...(parseConfig([], {}) as AdmissionConfig),
    secretConnections,
    bindAddress: '127.0.0.1',
    port: 0,
  };
  const source = new ManualSource();
  return {
    svc: new AdmissionService({ config, kubeConfig: kc, log: silentLogger, certificateSource: source }),
    source,
  };
}

describe('AdmissionService readiness', () => {
  it('is not ready without a certificate and synced caches, and says which', async () => {
    const { svc } = service(true);
    expect(svc.readiness()).toEqual({
      ready: false,
      reasons: [
        'no serving certificate loaded',
        'kdapps cache not synced',
        'kdclusters cache not synced',
        'configmaps cache not synced',
        'secrets cache not synced',
      ],
    });
    const ca = createCA();
    const pair = createServingCert({ ca, ipAddresses: ['127.0.0.1'] });
    // The hook a certificate bootstrapper calls.
    svc.setCertificate(pair.certPem, pair.keyPem);
    expect(svc.readiness().reasons).not.toContain('no serving certificate loaded');
    expect(svc.readiness().ready).toBe(false);
  });

  it('has no Secrets cache when Secret connections are disabled', () => {
    const { svc } = service(false);
    expect(svc.caches.secrets).toBeUndefined();
    expect(svc.readiness().reasons).not.toContain('secrets cache not synced');
  });

  it('listens only once a source delivered a certificate, and stops cleanly', async () => {
    const { svc, source } = service(false);
    let port: number | undefined;
    const started = svc.start().then((p) => (port = p));
    await new Promise((r) => setImmediate(r));
    expect(source.sink).toBeDefined();
    expect(port).toBeUndefined();
    const ca = createCA();
    const pair = createServingCert({ ca, ipAddresses: ['127.0.0.1'] });
    source.sink!.setCertificate(pair.certPem, pair.keyPem);
    await started;
    expect(port).toBeGreaterThan(0);
    await svc.stop();
    expect(svc.readiness().reasons).toContain('shutting down');
    expect(svc.server.server.listening).toBe(false);
  });
});
