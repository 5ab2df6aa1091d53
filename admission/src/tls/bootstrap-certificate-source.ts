/**
 * Bootstrap mode (the chart's default): the admission service makes and keeps its own serving
 * certificate in a kubernetes.io/tls Secret that every replica shares.
 *
 * - Start-up reads the Secret and creates it when absent. Replicas racing: one create wins, the others
 *   get 409 AlreadyExists, read the winner's Secret and serve it.
 * - A renewal is one write with a resourceVersion precondition (JSON Patch `test`); failing it means
 *   another replica renewed first, so this one re-reads and serves theirs. No read-modify-write loop.
 * - The webhook configurations' caBundle carries the current CA and every previous CA still needed
 *   (see bootstrap-plan.ts for the rule). A new CA is published, and given `caPropagationDelayMs` to
 *   reach the API servers, before the Secret that uses it is written, so no replica ever serves a leaf
 *   the API server cannot verify yet. CAs leave the bundle only late (see mergeBundle).
 * - The Secret and the configurations are watched (metadata only; every pass reads them live), and a
 *   timer wakes for renewal at two thirds of a lifetime and for bundle clean-up.
 * - Problems are explicit: a log line, an Event on the Secret, readiness false while no valid
 *   certificate is served, and retries with exponential backoff. A Secret that cannot be repaired is
 *   never replaced by something else: the pair in use stays until it expires.
 */
import type {
  CertificateInfo,
  WantedServing,
  WebhookConfigurationClient,
  WebhookConfigurationRef,
} from '@kd-connections/certs';
import {
  errorMessage,
  errorStatus,
  EventRecorder,
  Informer,
  isConflict,
  type EventTarget,
  type KubeClient,
  type Logger,
} from '@kd-connections/shared';
import type { CertificateSink, CertificateSource } from './certificate.js';
import { CABundlePublisher, kubeWebhookClient, type PublishResult } from './ca-bundle-publisher.js';
import { generateCertificates, generateInWorker, WorkerStartError, type Generator } from './certificate-generator.js';
import {
  certificatesIn,
  decodeSecret,
  desiredCAs,
  forgetUnpublished,
  mergeBundle,
  newSecretData,
  nextWakeAt,
  planFor,
  TLS_SECRET_TYPE,
  trackUnwanted,
  type Plan,
  type SecretObject,
} from './bootstrap-plan.js';

/** Time for a changed caBundle to reach every API server's webhook client (they watch the configurations). */
export const CA_PROPAGATION_DELAY_MS = 2_000;
/** How long a CA stays published after it is no longer wanted; must exceed the delay above plus one Secret write. */
export const PRUNE_AFTER_MS = 20_000;

export interface BootstrapOptions {
  /** Its user agent identifies the bootstrapper's writes (not the webhook path's). */
  client: KubeClient;
  secretNamespace: string;
  secretName: string;
  wanted: WantedServing;
  webhookConfigurations: readonly WebhookConfigurationRef[];
  servingLifetimeMs: number;
  caLifetimeMs: number;
  log: Logger;
  /** Events on the Secret; default: a recorder on `client`. */
  events?: Pick<EventRecorder, 'record'>;
  /** reportingInstance of events and part of the logs. */
  identity: string;
  /** Default: a worker thread per generation. */
  generate?: Generator;
  webhookClient?: WebhookConfigurationClient;
  caPropagationDelayMs?: number;
  pruneAfterMs?: number;
  backoff?: { initialMs: number; maxMs: number };
  /** Watch the Secret and configurations (default true; unit tests drive reconcile() by hand). */
  watch?: boolean;
  now?: () => Date;
  keyBits?: number;
}

interface Installed {
  certPem: string;
  fingerprint256: string;
  notBefore: Date;
  notAfter: Date;
  /** The CA (PEM) that signed it, kept as a previous-CA candidate for the next rotation. */
  issuerPem: string;
}

type WriteOutcome = { written: SecretObject } | { conflict: string };

export class BootstrapCertificateSource implements CertificateSource {
  private sink: CertificateSink | undefined;
  private installed: Installed | undefined;
  private lastError: string | undefined;
  private failures = 0;
  private stopped = false;
  private wakeTimer: NodeJS.Timeout | undefined;
  private kickTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private informers: Informer[] = [];
  private unwantedSince = new Map<string, number>();
  /** CAs this replica published for a Secret write that then failed. */
  private orphans = new Set<string>();
  private readonly publisher: CABundlePublisher;
  private readonly events: Pick<EventRecorder, 'record'>;
  private readonly generate: Generator;
  private readonly log: Logger;
  private readonly now: () => Date;
  private readonly delayMs: number;
  private readonly pruneAfterMs: number;
  private readonly backoff: { initialMs: number; maxMs: number };
  private readonly secretPath: string;
  private readonly where: string;

  constructor(private readonly o: BootstrapOptions) {
    this.where = `${o.secretNamespace}/${o.secretName}`;
    this.log = o.log.child({ tlsSecret: this.where });
    this.now = o.now ?? (() => new Date());
    this.delayMs = o.caPropagationDelayMs ?? CA_PROPAGATION_DELAY_MS;
    this.pruneAfterMs = o.pruneAfterMs ?? PRUNE_AFTER_MS;
    this.backoff = o.backoff ?? { initialMs: 1_000, maxMs: 60_000 };
    this.secretPath = `/api/v1/namespaces/${encodeURIComponent(o.secretNamespace)}/secrets`;
    this.publisher = new CABundlePublisher(o.webhookClient ?? kubeWebhookClient(o.client), o.webhookConfigurations);
    this.events =
      o.events ??
      new EventRecorder({
        client: o.client,
        controller: 'kd-connections.hpe.com/admission',
        instance: o.identity,
        log: this.log,
      });
    this.generate = o.generate ?? this.workerGenerator();
  }

  async start(sink: CertificateSink): Promise<void> {
    this.sink = sink;
    this.stopped = false;
    if (this.o.watch !== false) this.startWatches();
    await this.reconcile();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.wakeTimer);
    clearTimeout(this.kickTimer);
    const informers = this.informers.splice(0);
    void Promise.all(informers.map((i) => i.stop())).finally(() => this.o.client.close());
  }

  /** Readiness: false while no valid certificate is served, with the last error as the reason. */
  notReadyReasons(): string[] {
    const why = this.lastError ? `: ${this.lastError}` : '';
    const i = this.installed;
    if (!i) return [`no serving certificate from Secret ${this.where} yet${why}`];
    const t = this.now().getTime();
    if (t >= i.notAfter.getTime()) return [`serving certificate expired at ${i.notAfter.toISOString()}${why}`];
    if (t < i.notBefore.getTime()) return [`serving certificate not valid before ${i.notBefore.toISOString()}`];
    return [];
  }

  /** The serving certificate in use (SHA-256 of the DER, lower-case hex), for tests and logs. */
  get servingFingerprint(): string | undefined {
    return this.installed?.fingerprint256;
  }

  /** One pass (or joins the pass under way and runs another after it); never rejects. */
  reconcile(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.attempt();
      } while (this.again && !this.stopped);
    })().finally(() => (this.running = undefined));
    return this.running;
  }

  private kick(): void {
    if (this.stopped || this.kickTimer) return;
    // Coalesces the burst of events one write produces (the Secret, then both configurations).
    this.kickTimer = setTimeout(() => {
      this.kickTimer = undefined;
      void this.reconcile();
    }, 100);
    this.kickTimer.unref();
  }

  private wakeAt(at: Date | undefined, minMs = 1_000): void {
    clearTimeout(this.wakeTimer);
    this.wakeTimer = undefined;
    if (!at || this.stopped) return;
    // setTimeout cannot wait more than ~24.8 days; an early wake just re-evaluates.
    const delay = Math.min(2 ** 31 - 1, Math.max(minMs, at.getTime() - this.now().getTime()));
    this.wakeTimer = setTimeout(() => void this.reconcile(), delay);
    this.wakeTimer.unref();
  }

  private async attempt(): Promise<void> {
    if (this.stopped) return;
    try {
      const wake = await this.sync();
      if (this.failures > 0) this.log.info('certificate bootstrap recovered', { failures: this.failures });
      this.failures = 0;
      this.lastError = undefined;
      this.wakeAt(wake);
    } catch (e) {
      if (this.stopped) return;
      this.failures++;
      this.lastError = errorMessage(e);
      const base = Math.min(this.backoff.maxMs, this.backoff.initialMs * 2 ** (this.failures - 1));
      const delay = Math.round(base * (0.8 + 0.4 * Math.random()));
      this.log.error('certificate bootstrap failed; retrying', {
        error: this.lastError,
        failures: this.failures,
        retryInMs: delay,
        serving: this.installed?.fingerprint256 ?? null,
      });
      this.event('Warning', 'CertificateBootstrapFailed', 'Bootstrap', `${this.lastError} (retrying)`);
      this.wakeAt(new Date(this.now().getTime() + delay), 0);
    }
  }

  /** Brings Secret, caBundle and served pair in line; returns when to look again. */
  private async sync(): Promise<Date | undefined> {
    let secret = await this.readSecret();
    for (let round = 1; ; round++) {
      if (this.stopped) return undefined;
      const now = this.now();
      const plan = planFor(secret, this.o.wanted, now);
      for (const note of plan.notes) this.log.warn(note);
      if (plan.blocked) this.report(plan, secret);
      if (plan.action === 'keep' || plan.blocked) return this.use(secret!, plan, now);
      if (round > 3) throw new Error(`the Secret ${this.where} changed under each of 3 renewal attempts`);
      this.report(plan, secret);
      const outcome = await this.renew(plan, secret, now);
      if ('conflict' in outcome) {
        if (this.stopped) return undefined;
        this.log.info('another replica wrote the Secret first; using theirs', { detail: outcome.conflict });
        secret = await this.readSecret();
        continue;
      }
      secret = outcome.written;
    }
  }

  private async readSecret(): Promise<SecretObject | undefined> {
    try {
      return await this.o.client.get<SecretObject>(`${this.secretPath}/${encodeURIComponent(this.o.secretName)}`);
    } catch (e) {
      if (errorStatus(e) === 404) return undefined;
      throw new Error(`cannot read Secret ${this.where}: ${errorMessage(e)}`);
    }
  }

  /** Says why a write is coming (or why it cannot): damage as a Warning, routine renewal at info. */
  private report(plan: Plan, secret: SecretObject | undefined): void {
    const reasons = plan.decision?.reasons.map((r) => r.message) ?? ['Secret not found'];
    const repair = plan.action === 'renew-serving' ? 'a new serving certificate' : 'a new CA and serving certificate';
    if (plan.damage.length > 0 || plan.blocked) {
      const damage = plan.damage.length > 0 ? plan.damage.map((r) => r.message) : reasons;
      this.log.warn(
        plan.blocked ? 'TLS Secret needs renewal but cannot be written' : 'TLS Secret is invalid; repairing it',
        {
          reasons: damage,
          codes: (plan.damage.length > 0 ? plan.damage : (plan.decision?.reasons ?? [])).map((r) => r.code),
          repair,
        },
      );
      const what = plan.blocked ? `cannot write ${repair}: the Secret is immutable` : `writing ${repair}`;
      this.event('Warning', 'CertificateSecretInvalid', 'Repair', `${damage.join('; ')}; ${what}`, secret);
    } else {
      this.log.info(secret ? 'TLS Secret due for renewal' : 'TLS Secret not found; creating it', {
        reasons,
        repair,
      });
    }
  }

  private async renew(plan: Plan, secret: SecretObject | undefined, now: Date): Promise<WriteOutcome> {
    const contents = decodeSecret(secret);
    const newCA = plan.action !== 'renew-serving';
    const started = performance.now();
    const gen = await this.generate({
      ...(newCA ? {} : { ca: { certPem: contents.caCertPem!, keyPem: contents.caKeyPem! } }),
      caLifetimeMs: this.o.caLifetimeMs,
      servingLifetimeMs: this.o.servingLifetimeMs,
      ...(this.o.wanted.service ? { service: this.o.wanted.service } : {}),
      dnsNames: this.o.wanted.dnsNames ?? [],
      ipAddresses: this.o.wanted.ipAddresses ?? [],
      ...(this.o.keyBits ? { keyBits: this.o.keyBits } : {}),
      now,
    });
    this.log.info(newCA ? 'generated a CA and a serving certificate' : 'generated a serving certificate', {
      generationMs: gen.generationMs,
      wallMs: Math.round(performance.now() - started),
    });
    if (this.stopped) return { conflict: 'stopped' };
    const published = newCA ? (await this.publisher.read()).flatMap((r) => r.cas.map((c) => c.pem)) : [];
    const next = newSecretData({
      ca: gen.ca,
      serving: gen.serving,
      previousCAs: newCA
        ? [contents.caCertPem, contents.previousCAsPem, ...published, this.installed?.issuerPem]
        : [contents.previousCAsPem],
      leavesInUse: newCA
        ? [contents.certPem, contents.previousLeavesPem, this.installed?.certPem]
        : [contents.previousLeavesPem],
      now,
      ...(secret?.data ? { existing: secret.data } : {}),
    });
    const newCaFp = next.bundle.cas[0]!.fingerprint256;
    if (newCA) {
      // Trust before use: the API servers must know the new CA before any replica serves its leaf.
      const results = await this.publishBundle(next.bundle.cas, false);
      const failed = results.filter((r) => r.error);
      if (failed.length > 0) {
        this.orphans.add(newCaFp);
        throw new Error(`cannot publish the new CA: ${failed.map((r) => r.error).join('; ')}`);
      }
      if (results.some((r) => r.added.includes(newCaFp))) await this.sleep(this.delayMs);
    }
    try {
      const written = secret ? await this.patchSecret(secret, next.data) : await this.createSecret(next.data);
      const info = certificatesIn(gen.serving.certPem)[0]!;
      const what = !secret ? 'created' : newCA ? 'rotated the CA of' : 'renewed the serving certificate in';
      this.log.info(`${what} the TLS Secret`, {
        resourceVersion: written.metadata.resourceVersion ?? null,
        fingerprint: info.fingerprint256,
        notAfter: info.notAfter.toISOString(),
        previousCAs: next.bundle.cas.length - 1,
      });
      const reason = !secret ? 'CertificateCreated' : newCA ? 'CARotated' : 'CertificateRenewed';
      this.event(
        'Normal',
        plan.damage.length > 0 ? 'CertificateRepaired' : reason,
        !secret ? 'Create' : 'Renew',
        `${what} the Secret: serving certificate ${info.fingerprint256.slice(0, 23)} valid until ` +
          `${info.notAfter.toISOString()}${newCA ? `, new CA ${newCaFp.slice(0, 23)} (${next.bundle.cas.length - 1} previous kept)` : ''}`,
        written,
      );
      return { written };
    } catch (e) {
      const conflict = errorStatus(e) === 409 || errorStatus(e) === 404 || isConflict(e);
      // The CA published for a write that did not happen signs nothing: the next publish takes it out.
      if (newCA) this.orphans.add(newCaFp);
      if (conflict) return { conflict: errorMessage(e) };
      throw new Error(`cannot write Secret ${this.where}: ${errorMessage(e)}`);
    }
  }

  private createSecret(data: Record<string, string>): Promise<SecretObject> {
    const body: SecretObject = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: this.o.secretName,
        namespace: this.o.secretNamespace,
        labels: { 'app.kubernetes.io/name': 'kd-connections', 'app.kubernetes.io/component': 'admission-tls' },
      },
      type: TLS_SECRET_TYPE,
      data,
    };
    return this.o.client.request<SecretObject>('POST', this.secretPath, { body });
  }

  /** One write, conditional on the resourceVersion read: a failed `test` means someone else wrote first. */
  private patchSecret(secret: SecretObject, data: Record<string, string>): Promise<SecretObject> {
    return this.o.client.jsonPatch<SecretObject>(`${this.secretPath}/${encodeURIComponent(this.o.secretName)}`, [
      { op: 'test', path: '/metadata/resourceVersion', value: secret.metadata.resourceVersion },
      { op: 'add', path: '/data', value: data },
    ]);
  }

  /** Publishes the Secret's bundle, installs its pair when new, and reports what still fails. */
  private async use(secret: SecretObject, plan: Plan, now: Date): Promise<Date | undefined> {
    const contents = decodeSecret(secret);
    const desired = desiredCAs(contents, now);
    const results = await this.publishBundle(desired, plan.action === 'keep' && !plan.blocked);
    const pair = plan.servable;
    if (pair && pair.info.fingerprint256 !== this.installed?.fingerprint256) {
      const issuer = pair.issuer.fingerprint256;
      const trusted = results.every((r) => !r.exists || r.cas.some((c) => c.fingerprint256 === issuer));
      if (!trusted && this.servingValid(now)) {
        throw new Error(
          `not serving the Secret's new certificate yet: its CA is not in every caBundle (${results
            .map((r) => r.error)
            .filter(Boolean)
            .join('; ')})`,
        );
      }
      // Just added: give the API servers time to see it before presenting a leaf only it verifies.
      if (results.some((r) => r.added.includes(issuer))) await this.sleep(this.delayMs);
      if (this.stopped) return undefined;
      this.sink!.setCertificate(pair.certPem, pair.keyPem);
      this.installed = {
        certPem: pair.certPem,
        fingerprint256: pair.info.fingerprint256,
        notBefore: pair.info.notBefore,
        notAfter: pair.info.notAfter,
        issuerPem: pair.issuer.pem,
      };
      this.log.info('serving certificate from the Secret installed', {
        fingerprint: pair.info.fingerprint256,
        notAfter: pair.info.notAfter.toISOString(),
        resourceVersion: secret.metadata.resourceVersion ?? null,
      });
    }
    if (!pair && !this.installed) {
      const why = plan.decision?.reasons.map((r) => r.message).join('; ') || 'unknown';
      throw new Error(`Secret ${this.where} holds no usable serving certificate (${why})`);
    }
    const errors = results.filter((r) => r.error).map((r) => r.error!);
    if (plan.blocked) errors.unshift(plan.blocked);
    if (errors.length > 0) throw new Error(errors.join('; '));
    return nextWakeAt(contents, plan, this.unwantedSince, this.pruneAfterMs, now);
  }

  private servingValid(now: Date): boolean {
    const i = this.installed;
    return !!i && now.getTime() >= i.notBefore.getTime() && now.getTime() < i.notAfter.getTime();
  }

  private async publishBundle(desired: CertificateInfo[], allowPrune: boolean): Promise<PublishResult[]> {
    const results = await this.publisher.publish((published) => {
      const now = this.now();
      if (allowPrune) this.unwantedSince = trackUnwanted(this.unwantedSince, published, desired, now.getTime());
      return mergeBundle(published, desired, {
        now,
        unwantedSince: this.unwantedSince,
        pruneAfterMs: this.pruneAfterMs,
        allowPrune,
        withdraw: this.orphans,
      });
    });
    if (results.every((r) => !r.error)) {
      const still = new Set(results.flatMap((r) => r.cas.map((c) => c.fingerprint256)));
      this.orphans = new Set([...this.orphans].filter((fp) => still.has(fp)));
    }
    if (allowPrune) {
      this.unwantedSince = forgetUnpublished(
        this.unwantedSince,
        results.flatMap((r) => r.cas),
      );
    }
    for (const r of results) {
      const what = `${r.ref.kind}/${r.ref.name}`;
      if (!r.exists) {
        this.log.warn('webhook configuration not found; its caBundle is set once it exists', { configuration: what });
        this.event('Warning', 'WebhookConfigurationNotFound', 'PublishCA', `${what} not found; caBundle not set`);
      } else if (r.changed) {
        this.log.info('caBundle published', {
          configuration: what,
          cas: r.cas.map((c) => c.fingerprint256.slice(0, 23)),
          added: r.added.length,
          removed: r.removed.length,
        });
      }
    }
    return results;
  }

  private event(type: 'Normal' | 'Warning', reason: string, action: string, note: string, secret?: SecretObject): void {
    const regarding: EventTarget = {
      apiVersion: 'v1',
      kind: 'Secret',
      namespace: this.o.secretNamespace,
      name: this.o.secretName,
      ...(secret?.metadata.uid ? { uid: secret.metadata.uid } : {}),
    };
    this.events.record({ regarding, type, reason, action, note: `${note} [${this.o.identity}]` });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((r) => setTimeout(r, ms));
  }

  private startWatches(): void {
    const kick = () => this.kick();
    const watch = (name: string, path: string, objectName: string) => {
      const informer = new Informer({
        name,
        client: this.o.client,
        path,
        fieldSelector: `metadata.name=${objectName}`,
        // Only a trigger: every pass reads live, so nothing is cached but names and versions.
        metadataOnly: true,
        log: this.log,
      });
      informer.on('add', kick).on('update', kick).on('delete', kick).start();
      this.informers.push(informer);
    };
    watch('tls-secret', this.secretPath, this.o.secretName);
    for (const ref of this.o.webhookConfigurations) {
      watch(
        `${ref.kind}webhookconfiguration/${ref.name}`,
        `/apis/admissionregistration.k8s.io/v1/${ref.kind}webhookconfigurations`,
        ref.name,
      );
    }
  }

  private workerGenerator(): Generator {
    return async (req) => {
      try {
        return await generateInWorker(req);
      } catch (e) {
        if (!(e instanceof WorkerStartError)) throw e;
        this.log.warn('certificate worker unavailable; generating on the main thread', { error: e.message });
        return generateCertificates(req);
      }
    };
  }
}
