/**
 * Bootstrap mode (the chart's default): the renewal loop by which the admission service makes and keeps
 * its own serving certificate in a kubernetes.io/tls Secret that every replica shares. The Secret's
 * storage is tls-secret-store.ts, the caBundle publication ca-bundle-publisher.ts, and every decision
 * is the pure plan in @kd-connections/certs (bootstrap-plan.ts).
 *
 * - Start-up reads the Secret and creates it when absent. Replicas racing: one create wins, the others
 *   get 409 AlreadyExists, read the winner's Secret and serve it.
 * - A renewal is one write with a resourceVersion precondition (JSON Patch `test`); failing it means
 *   another replica renewed first, so this one re-reads and serves theirs. No read-modify-write loop.
 * - The webhook configurations' caBundle carries the current CA and every previous CA still needed
 *   (see bootstrap-plan.ts in certs for the rule). A new CA is published, and given `caPropagationDelayMs` to
 *   reach the API servers, before the Secret that uses it is written, so no replica ever serves a leaf
 *   the API server cannot verify yet. CAs leave the bundle only late (see mergeBundle).
 * - The Secret and the configurations are watched (metadata only; every pass reads them live), and a
 *   timer wakes for renewal at two thirds of a lifetime and for bundle clean-up.
 * - Problems are explicit: a log line, an Event on the Secret, readiness false while no valid
 *   certificate is served, and retries with exponential backoff. A Secret that cannot be repaired is
 *   never replaced by something else: the pair in use stays until it expires.
 */
import {
  certificatesIn,
  decodeSecret,
  desiredCAs,
  newSecretData,
  acceptedPathTokens,
  learnPathToken,
  nextPathTokenData,
  nextWakeAt,
  PATH_TOKEN_KEY,
  PATH_TOKEN_ROTATION_MS,
  pathTokenDue,
  pathTokenState,
  pathTokenTiming,
  pathTokenWakeAt,
  planFor,
  publishCurrentNow,
  type LocalPathToken,
  type PathTokenState,
  type PathTokenTiming,
  webhookConfigurationClient,
  type CertificateInfo,
  type Plan,
  type SecretObject,
  type WantedServing,
  type WebhookConfigurationClient,
  type WebhookConfigurationRef,
} from '@kd-connections/certs';
import { EventRecorder, Informer, type KubeClient, type Logger } from '@kd-connections/shared/runtime';
import type { CertificateSink, CertificateSource } from './certificate.js';
import { CABundlePublisher } from './ca-bundle-publisher.js';
import { workerGenerator, type Generator } from './certificate-generator.js';
import { RenewalScheduler } from './renewal-scheduler.js';
import { TlsSecretStore, type WriteOutcome } from './tls-secret-store.js';
import { WebhookPathPublisher } from './webhook-path-publisher.js';

/** Time for a changed caBundle to reach every API server's webhook client (they watch the configurations). */
export const CA_PROPAGATION_DELAY_MS = 2_000;

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
  /**
   * The route of each webhook of `webhookConfigurations` by name: its path is kept at `/t/<token><route>`
   * with `pathToken`, else at `<route>` (so turning the token off takes the token paths back). Absent:
   * paths are left alone.
   */
  webhookRoutes?: (webhookName: string) => string | undefined;
  /** Keep a webhook path token in the Secret, publish it in the paths and accept reviews only behind it. */
  pathToken?: boolean;
  /** How often the path token is replaced (0: never); default PATH_TOKEN_ROTATION_MS. */
  pathTokenRotationMs?: number;
}

interface Installed {
  certPem: string;
  fingerprint256: string;
  notBefore: Date;
  notAfter: Date;
  /** The CA (PEM) that signed it, kept as a previous-CA candidate for the next rotation. */
  issuerPem: string;
}

export class BootstrapCertificateSource implements CertificateSource {
  private sink: CertificateSink | undefined;
  private installed: Installed | undefined;
  private readonly scheduler: RenewalScheduler;
  private readonly store: TlsSecretStore;
  private readonly publisher: CABundlePublisher;
  private readonly paths: WebhookPathPublisher | undefined;
  private readonly timing: PathTokenTiming;
  /** This replica's view of the path token (what it accepts and publishes, on its own clock). */
  private localToken: LocalPathToken | undefined;
  private immutableNoted = false;
  private readonly generate: Generator;
  private readonly log: Logger;
  private readonly now: () => Date;
  private readonly delayMs: number;
  private readonly where: string;

  constructor(private readonly o: BootstrapOptions) {
    this.where = `${o.secretNamespace}/${o.secretName}`;
    this.log = o.log.child({ tlsSecret: this.where });
    this.now = o.now ?? (() => new Date());
    this.delayMs = o.caPropagationDelayMs ?? CA_PROPAGATION_DELAY_MS;
    const events =
      o.events ??
      new EventRecorder({
        client: o.client,
        controller: 'kd-connections.hpe.com/admission',
        instance: o.identity,
        log: this.log,
      });
    this.store = new TlsSecretStore({
      client: o.client,
      namespace: o.secretNamespace,
      name: o.secretName,
      events,
      identity: o.identity,
    });
    const webhookClient = o.webhookClient ?? webhookConfigurationClient(o.client);
    this.publisher = new CABundlePublisher(webhookClient, o.webhookConfigurations, {
      ...(o.pruneAfterMs !== undefined ? { pruneAfterMs: o.pruneAfterMs } : {}),
      now: this.now,
      log: this.log,
      onMissing: (what) =>
        this.store.record(
          'Warning',
          'WebhookConfigurationNotFound',
          'PublishCA',
          `${what} not found; caBundle not set`,
        ),
    });
    this.timing = pathTokenTiming(o.pathTokenRotationMs ?? PATH_TOKEN_ROTATION_MS);
    this.paths = o.webhookRoutes
      ? new WebhookPathPublisher(webhookClient, o.webhookConfigurations, o.webhookRoutes, this.log)
      : undefined;
    this.generate = o.generate ?? workerGenerator(this.log);
    this.scheduler = new RenewalScheduler({
      pass: () => this.sync(),
      now: this.now,
      backoff: o.backoff ?? { initialMs: 1_000, maxMs: 60_000 },
      onRecovered: (failures) => this.log.info('certificate bootstrap recovered', { failures }),
      onFailure: (error, failures, retryInMs) => {
        this.log.error('certificate bootstrap failed; retrying', {
          error,
          failures,
          retryInMs,
          serving: this.installed?.fingerprint256 ?? null,
        });
        this.store.record('Warning', 'CertificateBootstrapFailed', 'Bootstrap', `${error} (retrying)`);
      },
    });
  }

  private get stopped(): boolean {
    return this.scheduler.isStopped;
  }

  async start(sink: CertificateSink): Promise<void> {
    this.sink = sink;
    this.scheduler.resume();
    if (this.o.watch !== false) this.startWatches();
    await this.reconcile();
  }

  stop(): void {
    void this.scheduler.stop().finally(() => this.o.client.close());
  }

  /**
   * Readiness: false while no valid certificate is served, or (with a path token) while no token is
   * known — every review would be refused — with the last error as the reason.
   */
  notReadyReasons(): string[] {
    const why = this.scheduler.lastError ? `: ${this.scheduler.lastError}` : '';
    const i = this.installed;
    if (!i) return [`no serving certificate from Secret ${this.where} yet${why}`];
    if (this.o.pathToken && !this.localToken) return [`no webhook path token from Secret ${this.where} yet${why}`];
    const t = this.now().getTime();
    if (t >= i.notAfter.getTime()) return [`serving certificate expired at ${i.notAfter.toISOString()}${why}`];
    if (t < i.notBefore.getTime()) return [`serving certificate not valid before ${i.notBefore.toISOString()}`];
    return [];
  }

  /** The path tokens a review may come with now (empty: none known yet, so no review is served). */
  pathTokens(): readonly string[] {
    return acceptedPathTokens(this.localToken, this.now().getTime(), this.timing);
  }

  /** Takes in the Secret's token as soon as it is read, before anything else the pass does. */
  private learnPathToken(secret: SecretObject | undefined): void {
    if (this.o.pathToken) {
      this.localToken = learnPathToken(this.localToken, pathTokenState(secret?.data), this.now().getTime());
    }
  }

  /** The serving certificate in use (SHA-256 of the DER, lower-case hex), for tests and logs. */
  get servingFingerprint(): string | undefined {
    return this.installed?.fingerprint256;
  }

  /** One pass (or joins the pass under way and runs another after it); never rejects. */
  reconcile(): Promise<void> {
    return this.scheduler.run();
  }

  /** Brings Secret, caBundle and served pair in line; returns when to look again. */
  private async sync(): Promise<Date | undefined> {
    let secret = await this.store.read();
    this.learnPathToken(secret);
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
        secret = await this.store.read();
        this.learnPathToken(secret);
        continue;
      }
      secret = outcome.written;
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
      this.store.record('Warning', 'CertificateSecretInvalid', 'Repair', `${damage.join('; ')}; ${what}`, secret);
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
    const gen = await this.generatePair(newCA, contents, now);
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
    if (newCA) await this.trustBeforeUse(next.bundle.cas, newCaFp);
    let outcome: WriteOutcome;
    try {
      outcome = await this.store.write(secret, next.data);
    } catch (e) {
      if (newCA) this.publisher.withdraw(newCaFp);
      throw e;
    }
    if ('conflict' in outcome) {
      if (newCA) this.publisher.withdraw(newCaFp);
      return outcome;
    }
    this.reportWritten(outcome.written, plan, {
      before: secret,
      newCaFp: newCA ? newCaFp : undefined,
      certPem: gen.serving.certPem,
      previousCAs: next.bundle.cas.length - 1,
    });
    return outcome;
  }

  private async generatePair(newCA: boolean, contents: ReturnType<typeof decodeSecret>, now: Date) {
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
    return gen;
  }

  /** The API servers must know a new CA before any replica serves its leaf: publish, then wait. */
  private async trustBeforeUse(cas: CertificateInfo[], newCaFp: string): Promise<void> {
    const results = await this.publisher.publishDesired(cas, false);
    const failed = results.filter((r) => r.error);
    if (failed.length > 0) {
      this.publisher.withdraw(newCaFp);
      throw new Error(`cannot publish the new CA: ${failed.map((r) => r.error).join('; ')}`);
    }
    if (results.some((r) => r.added.includes(newCaFp))) await this.sleep(this.delayMs);
  }

  private reportWritten(
    written: SecretObject,
    plan: Plan,
    w: { before: SecretObject | undefined; newCaFp: string | undefined; certPem: string; previousCAs: number },
  ): void {
    const { before, newCaFp, certPem, previousCAs } = w;
    const newCA = newCaFp !== undefined;
    const info = certificatesIn(certPem)[0]!;
    const what = !before ? 'created' : newCA ? 'rotated the CA of' : 'renewed the serving certificate in';
    this.log.info(`${what} the TLS Secret`, {
      resourceVersion: written.metadata.resourceVersion ?? null,
      fingerprint: info.fingerprint256,
      notAfter: info.notAfter.toISOString(),
      previousCAs,
    });
    const reason = !before ? 'CertificateCreated' : newCA ? 'CARotated' : 'CertificateRenewed';
    this.store.record(
      'Normal',
      plan.damage.length > 0 ? 'CertificateRepaired' : reason,
      !before ? 'Create' : 'Renew',
      `${what} the Secret: serving certificate ${info.fingerprint256.slice(0, 23)} valid until ` +
        `${info.notAfter.toISOString()}${newCA ? `, new CA ${newCaFp!.slice(0, 23)} (${previousCAs} previous kept)` : ''}`,
      written,
    );
  }

  /** Publishes the Secret's bundle, installs its pair when new, and reports what still fails. */
  private async use(secret: SecretObject, plan: Plan, now: Date): Promise<Date | undefined> {
    const contents = decodeSecret(secret);
    const desired = desiredCAs(contents, now);
    const results = await this.publisher.publishDesired(desired, plan.action === 'keep' && !plan.blocked);
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
    const paths = this.paths ? await this.usePaths(secret, now) : { errors: [], wakeAt: undefined };
    errors.push(...paths.errors);
    if (plan.blocked) errors.unshift(plan.blocked);
    if (errors.length > 0) throw new Error(errors.join('; '));
    const wake = nextWakeAt(contents, plan, this.publisher.unwantedSince, this.publisher.pruneAfterMs, now);
    return wake && paths.wakeAt ? (wake < paths.wakeAt ? wake : paths.wakeAt) : (wake ?? paths.wakeAt);
  }

  /**
   * With a path token: makes sure the Secret holds a current one (adding or rotating it), takes it in,
   * and points the webhooks at it — a token learned by replacing another only `publishAfterMs` later,
   * meanwhile leaving a path behind either as it is. Without: bare paths. Returns what could not be
   * published, and when time alone changes the token state next.
   */
  private async usePaths(secret: SecretObject, now: Date): Promise<{ errors: string[]; wakeAt: Date | undefined }> {
    if (!this.o.pathToken) {
      const results = await this.paths!.publish(undefined);
      return { errors: results.filter((r) => r.error).map((r) => r.error!), wakeAt: undefined };
    }
    const got = await this.currentPathToken(secret);
    if ('error' in got) return { errors: [got.error], wakeAt: undefined };
    this.localToken = learnPathToken(this.localToken, got.state, this.now().getTime());
    const local = this.localToken!;
    if (this.stopped) return { errors: [], wakeAt: undefined };
    const publishNow = publishCurrentNow(local, this.now().getTime(), this.timing);
    const results = publishNow
      ? await this.paths!.publish(local.current, [local.current])
      : await this.paths!.publish(local.previous, [local.current, local.previous!]);
    const errors = results.filter((r) => r.error).map((r) => r.error!);
    // The previous token stays accepted until this replica's own publication of the new one succeeded.
    if (publishNow && errors.length === 0) this.localToken = { ...local, published: true };
    return { errors, wakeAt: pathTokenWakeAt(this.localToken, got.state, now.getTime(), this.timing) };
  }

  /** The Secret's token state, with a token added or rotated when due (a replica writing first wins). */
  private async currentPathToken(
    secret: SecretObject | undefined,
  ): Promise<{ state: PathTokenState } | { error: string }> {
    for (let conflicts = 0; ;) {
      const state = pathTokenState(secret?.data);
      const due = pathTokenDue(state, this.now(), this.timing);
      if (!due) return { state };
      if (!secret) return { error: `Secret ${this.where} is gone; it is created again on the next pass` };
      if (secret.immutable === true) {
        if (state.current) {
          // Rotation needs a write: an immutable Secret keeps the token it has.
          if (!this.immutableNoted) this.log.warn('the TLS Secret is immutable: the webhook path token is not rotated');
          this.immutableNoted = true;
          return { state };
        }
        return {
          error: `Secret ${this.where} is immutable and holds no valid ${PATH_TOKEN_KEY}; delete it and it is created again`,
        };
      }
      if (conflicts >= 3)
        throw new Error(`the Secret ${this.where} changed under each of 3 attempts to write a webhook path token`);
      const outcome = await this.store.addKeys(secret, nextPathTokenData(state, this.now()));
      if ('written' in outcome) {
        this.log.info(due === 'add' ? 'webhook path token added to the TLS Secret' : 'webhook path token rotated', {
          key: PATH_TOKEN_KEY,
        });
        secret = outcome.written;
      } else {
        conflicts++;
        this.log.info('the Secret changed while the webhook path token was written; reading it again', {
          detail: outcome.conflict,
        });
        secret = await this.store.read();
      }
    }
  }

  private servingValid(now: Date): boolean {
    const i = this.installed;
    return !!i && now.getTime() >= i.notBefore.getTime() && now.getTime() < i.notAfter.getTime();
  }

  /** Publishes and says what happened to each configuration (log, and an Event when one is missing). */
  private sleep(ms: number): Promise<void> {
    return new Promise((r) => setTimeout(r, ms));
  }

  private startWatches(): void {
    const watch = (name: string, path: string, objectName: string) =>
      this.scheduler.watch(
        new Informer({
          name,
          client: this.o.client,
          path,
          fieldSelector: `metadata.name=${objectName}`,
          // Only a trigger: every pass reads live, so nothing is cached but names and versions.
          metadataOnly: true,
          log: this.log,
        }),
      );
    watch('tls-secret', this.store.collectionPath, this.store.name);
    for (const ref of this.o.webhookConfigurations) {
      watch(
        `${ref.kind}webhookconfiguration/${ref.name}`,
        `/apis/admissionregistration.k8s.io/v1/${ref.kind}webhookconfigurations`,
        ref.name,
      );
    }
  }
}
