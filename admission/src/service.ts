/**
 * The admission service assembled: caches → lookup → webhooks → Express app → HTTPS server, with a
 * certificate source feeding the server. `main.ts` adds the process around it (flags, signals).
 * A certificate bootstrapper plugs in as another CertificateSource, or calls `setCertificate` itself.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { CachedLookup, liveGet, type LiveGet } from '@kd-connections/shared/caches';
import { guardEventTarget, KubeDirectorGuard } from '@kd-connections/shared/kubedirector';
import {
  errorMessage,
  EventRecorder,
  KubeClient,
  type KubeConnection,
  type Logger,
  ProbeServer,
  type Readiness,
} from '@kd-connections/shared/runtime';
import { createApp } from './app.js';
import { BodyGarbage } from './body-garbage.js';
import { AdmissionCaches } from './caches.js';
import type { AdmissionConfig } from './config.js';
import { AdmissionMetrics } from './metrics.js';
import { ReviewLimiter } from './review-limiter.js';
import { AdmissionServer } from './server.js';
import { DynamicServingSource } from './tls/dynamic-serving.js';
import type { CertificateSink, CertificateSource } from './tls/certificate.js';
import { FileCertificateSource } from './tls/file-certificate-source.js';
import { WEBHOOKS } from './webhooks/index.js';

export interface ServiceOptions {
  config: AdmissionConfig;
  kubeConfig: KubeConnection;
  log: Logger;
  /** Default: the files named by the configuration, or the TLS Secret in bootstrap mode. */
  certificateSource?: CertificateSource;
  /** This replica in events and the bootstrapper's user agent; default $POD_NAME, else host-pid. */
  identity?: string;
}

/** Live reads at the API server at once, for all reviews together. */
const LIVE_READS_AT_ONCE = 16;

/** `get` with at most `n` calls outstanding; the others wait in order. */
function limitConcurrency(get: LiveGet, n: number): LiveGet {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async <T>(path: string, accept: string) => {
    // A finished call hands its slot to the next waiting one, so no newcomer slips in between.
    if (running >= n) await new Promise<void>((r) => waiting.push(r));
    else running++;
    try {
      return await get<T>(path, accept);
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}

/** The bootstrapper's API writes carry this user agent, distinct from the webhook path's. */
export const BOOTSTRAP_USER_AGENT = 'kd-connections-tls-bootstrap';

function defaultIdentity(): string {
  return process.env.POD_NAME || `${hostname()}-${process.pid}`;
}

/** Bootstrap mode from the configuration: the Secret, the SANs, the configurations to keep trusting us. */
export function bootstrapSource(config: AdmissionConfig, kubeConfig: KubeConnection, log: Logger, identity: string) {
  return new DynamicServingSource({
    client: new KubeClient(kubeConfig, `${BOOTSTRAP_USER_AGENT}/${identity}`),
    secretNamespace: config.tlsSecretNamespace!,
    secretName: config.tlsSecretName,
    wanted: {
      service: { name: config.serviceName, namespace: config.serviceNamespace! },
      dnsNames: config.extraDnsNames,
      ipAddresses: config.extraIpAddresses,
    },
    webhookConfigurations: config.webhookConfigurations,
    servingLifetimeMs: config.servingCertLifetimeMs,
    caLifetimeMs: config.caLifetimeMs,
    log: log.child({ source: 'tls-bootstrap' }),
    identity,
    webhookRoutes: webhookRoute,
    pathToken: config.webhookPathToken,
    pathTokenRotationMs: config.webhookPathTokenRotationMs,
  });
}

const ROUTES = new Set(WEBHOOKS.map((w) => w.path));

/** A webhook's route from its name in the chart's configurations: "validate-kdcluster.<domain>" → "/validate-kdcluster". */
function webhookRoute(webhookName: string): string | undefined {
  const route = `/${webhookName.split('.')[0]}`;
  return ROUTES.has(route) ? route : undefined;
}

/** The client CA bundle, read once at start; a missing or certificate-less file stops the start. */
function readClientCa(file: string): string {
  const pem = readFileSync(file, 'utf8');
  if (!pem.includes('-----BEGIN CERTIFICATE-----'))
    throw new Error(`--client-ca-file ${file} holds no PEM certificate`);
  return pem;
}

export class AdmissionService implements CertificateSink {
  readonly metrics: AdmissionMetrics;
  readonly caches: AdmissionCaches;
  readonly server: AdmissionServer;
  readonly probes: ProbeServer | undefined;
  /** The default mode's refusal to act next to KubeDirector; none in kubedirector mode. */
  readonly guard: KubeDirectorGuard | undefined;
  private readonly client: KubeClient;
  private readonly source: CertificateSource;
  private readonly log: Logger;

  constructor(private readonly opts: ServiceOptions) {
    const { config, log } = opts;
    this.log = log;
    this.client = new KubeClient(opts.kubeConfig, 'kd-connections-admission');
    this.caches = new AdmissionCaches({
      client: this.client,
      secretConnections: config.secretConnections,
      namespaces: config.namespaces,
      systemNamespace: config.systemNamespace,
      log,
      onRestart: (informer, reason) => this.metrics.informerRestarts.inc({ informer, reason }),
    });
    const limiter = new ReviewLimiter({
      maxInFlight: config.maxInFlight,
      maxBytes: config.maxInFlightBytes,
      maxQueued: config.maxQueued,
      onChange: (inFlight, queued) => {
        this.metrics.inFlight.set(inFlight);
        this.metrics.queued.set(queued);
      },
    });
    this.metrics = new AdmissionMetrics({
      defaultMetrics: true,
      cacheSizes: () => this.caches.sizes(),
      ready: () => this.readiness().ready,
      inFlightMax: () => limiter.highWater,
    });
    // Live reads (cache misses) of all reviews together, at most this many at once: the reviews in
    // flight are bounded, and so is what they can ask of the API server at a time.
    const live = limitConcurrency(liveGet(this.client), LIVE_READS_AT_ONCE);
    const lookup = new CachedLookup(this.caches.stores, live, (kind, source) => this.metrics.lookup(kind, source));
    const identity = opts.identity ?? defaultIdentity();
    this.guard = config.kubedirectorMode
      ? undefined
      : new KubeDirectorGuard({
          client: this.client,
          log,
          events: new EventRecorder({
            client: this.client,
            controller: 'kd-connections-admission',
            instance: identity,
            log,
          }),
          regarding: guardEventTarget(),
          component: 'kd-connections admission',
        });
    const app = createApp({
      webhooks: WEBHOOKS,
      deps: {
        lookup,
        rules: {
          systemNamespace: config.systemNamespace,
          secretConnections: config.secretConnections,
          kubedirector: config.kubedirectorMode,
        },
        refusal: () => this.guard?.refusal,
        delivery: { image: config.guestconfigImage, secretDelivery: config.secretDelivery },
      },
      namespaces: {
        only: config.namespaces,
        excluded: config.excludedNamespaces,
        apps: [config.systemNamespace],
      },
      metrics: this.metrics,
      log,
      readiness: () => this.readiness(),
      draining: () => this.server.draining,
      limiter,
      reviewDeadlineMs: config.reviewDeadlineMs,
      ...(config.webhookPathToken ? { pathTokens: () => this.source.pathTokens?.() ?? [] } : {}),
      garbage: new BodyGarbage(),
    });
    this.server = new AdmissionServer({
      app,
      host: config.bindAddress,
      port: config.port,
      log,
      metrics: this.metrics,
      headersTimeoutMs: config.headersTimeoutMs,
      requestTimeoutMs: config.requestTimeoutMs,
      clientCaPem: config.clientCaFile !== undefined ? readClientCa(config.clientCaFile) : undefined,
      clientAllowedNames: config.clientAllowedNames,
    });
    this.probes =
      config.probePort !== undefined
        ? new ProbeServer({
            host: config.bindAddress,
            port: config.probePort,
            readiness: () => this.readiness(),
            metrics: this.metrics.registry,
          })
        : undefined;
    this.source =
      opts.certificateSource ??
      (config.tlsMode === 'bootstrap'
        ? bootstrapSource(config, opts.kubeConfig, log, identity)
        : new FileCertificateSource({
            certFile: config.tlsCertFile,
            keyFile: config.tlsKeyFile,
            pollIntervalMs: config.tlsPollIntervalMs,
            log,
          }));
  }

  readiness(): Readiness {
    const reasons: string[] = [];
    if (this.server.draining) reasons.push('shutting down');
    if (!this.server.tlsLoaded) reasons.push('no serving certificate loaded');
    reasons.push(...(this.source.notReadyReasons?.() ?? []));
    reasons.push(...this.caches.unsynced().map((c) => `${c} not synced`));
    return { ready: reasons.length === 0, reasons };
  }

  /** The hook a certificate bootstrapper calls with a new pair. */
  setCertificate(certPem: string, keyPem: string): void {
    this.server.setCertificate(certPem, keyPem);
  }

  /** Starts the caches and the certificate source, then listens (once a certificate is loaded). */
  async start(): Promise<number> {
    // The guard's first look runs beside the start-up and is done before the first review is answered.
    const guarded = this.guard?.start();
    this.caches.start();
    // Probes answer (not ready) while the certificate and caches load.
    const probePort = await this.probes?.listen();
    await this.source.start(this.server);
    await guarded;
    const port = await this.server.listen();
    this.log.info('listening', {
      address: this.opts.config.bindAddress,
      port,
      tlsMode: this.opts.config.tlsMode,
      systemNamespace: this.opts.config.systemNamespace,
      namespaces: this.opts.config.namespaces.length > 0 ? this.opts.config.namespaces : 'all',
      excludedNamespaces: this.opts.config.excludedNamespaces,
      secretConnections: this.opts.config.secretConnections,
      mode: this.opts.config.kubedirectorMode ? 'kubedirector' : 'default',
      clientCertificates: this.opts.config.clientCaFile !== undefined ? 'required' : 'off',
      ...(probePort !== undefined ? { probePort } : {}),
    });
    return port;
  }

  /** SIGTERM: not ready at once, optionally keep serving for a while, then drain and stop. */
  async stop(): Promise<void> {
    const { shutdownDelayMs, shutdownTimeoutMs } = this.opts.config;
    this.server.beginDrain();
    this.log.info('shutting down', { delayMs: shutdownDelayMs, timeoutMs: shutdownTimeoutMs });
    if (shutdownDelayMs > 0) await new Promise((r) => setTimeout(r, shutdownDelayMs));
    const { forced } = await this.server.shutdown(shutdownTimeoutMs);
    await this.probes?.close();
    this.source.stop();
    this.guard?.stop();
    await this.caches.stop().catch((e) => this.log.warn('stopping caches failed', { error: errorMessage(e) }));
    this.client.close();
    this.log.info('stopped', { forced });
  }
}
