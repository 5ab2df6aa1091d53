/**
 * Dynamic serving (the chart's default; cert-manager's webhook is the model): the CA lives in one
 * kubernetes.io/tls Secret; each replica generates its serving key in memory and signs its own leaf from
 * that CA, renewing it at two thirds of its lifetime with no API write. Every decision is a pure function
 * in @kd-connections/certs (ca-secret.ts, bundle-merge.ts, webhook-path.ts); this is the loop around them.
 *
 * - A pass reads the Secret live. Absent: this replica creates it; racing replicas get 409 AlreadyExists
 *   and use the winner's. A CA that is unusable, expired or at two thirds of its lifetime is replaced by
 *   one write with a resourceVersion precondition (JSON Patch `test`); losing it means another replica
 *   wrote first, so this one re-reads. No read-modify-write loop.
 * - The webhook configurations get the Secret's CAs in their caBundle (webhook-injector.ts, the only writer)
 *   and, with a path token, the current token in their paths.
 * - A leaf is signed from a CA only once every caBundle has carried that CA for `caPropagationDelayMs`,
 *   so no replica serves a leaf the API servers cannot verify yet.
 * - The Secret and the configurations are watched (metadata only) and a timer wakes for the next due time.
 * - Problems are explicit: a log line, an Event on the Secret, readiness false while no valid certificate
 *   is served, and retries with exponential backoff. An immutable Secret that needs a write is reported,
 *   and the leaf in use is served until it expires.
 */
import {
  caSecretData,
  createCA,
  createServingCert,
  generateKeyPem,
  inspectCertificate,
  LEGACY_TOKEN_MAX_AGE_MS,
  planCA,
  previousTrustedUntil,
  readCASecret,
  renewAt,
  trustedCAs,
  webhookConfigurationClient,
  type CAPlan,
  type CASecret,
  type CertificateInfo,
  type SecretObject,
  type WebhookConfigurationClient,
  type WebhookConfigurationRef,
} from '@kd-connections/certs';
import {
  errorMessage,
  EventRecorder,
  Informer,
  WorkQueue,
  type KubeClient,
  type Logger,
} from '@kd-connections/shared/runtime';
import type { CertificateSink, CertificateSource } from './certificate.js';
import { PATH_TOKEN_ROTATION_MS, pathTokenClock } from '../path-token/path-token-rules.js';
import { PathTokens } from '../path-token/path-token-state.js';
import { TlsSecretStore } from './tls-secret-store.js';
import { WebhookInjector, type InjectResult } from './webhook-injector.js';

/** Time for a changed caBundle to reach every API server's webhook client (they watch the configurations). */
export const CA_PROPAGATION_DELAY_MS = 2_000;

/** What each kind of Secret write does, in logs and as the Event's reason. */
const WRITES = {
  create: { what: 'created the CA Secret', reason: 'CACreated' },
  repair: { what: 'rotated the CA', reason: 'CARepaired' },
  'new-ca': { what: 'rotated the CA', reason: 'CARotated' },
  'path-key': { what: 'added the webhook path key', reason: 'PathKeyAdded' },
  'drop-legacy-token': { what: "removed 0.1.0's webhook path token", reason: 'LegacyPathTokenRemoved' },
} as const;

export interface DynamicServingOptions {
  /** Its user agent identifies these writes (not the webhook path's). */
  client: KubeClient;
  secretNamespace: string;
  secretName: string;
  /** The names every leaf covers. */
  wanted: { service?: { name: string; namespace: string }; dnsNames?: string[]; ipAddresses?: string[] };
  webhookConfigurations: readonly WebhookConfigurationRef[];
  servingLifetimeMs: number;
  caLifetimeMs: number;
  log: Logger;
  /** Events on the Secret; default: a recorder on `client`. */
  events?: Pick<EventRecorder, 'record'>;
  /** reportingInstance of events and part of the logs. */
  identity: string;
  webhookClient?: WebhookConfigurationClient;
  caPropagationDelayMs?: number;
  pruneAfterMs?: number;
  backoff?: { initialMs: number; maxMs: number };
  /** Watch the Secret and configurations (default true; unit tests drive reconcile() by hand). */
  watch?: boolean;
  now?: () => Date;
  keyBits?: number;
  /** The route of each webhook by name: with it, paths are kept at `/t/<token><route>` (pathToken) or `<route>`. */
  webhookRoutes?: (webhookName: string) => string | undefined;
  /** Publish a path token in the webhook paths and accept reviews only behind it. */
  pathToken?: boolean;
  /** The token's rotation period (0: never); default PATH_TOKEN_ROTATION_MS. */
  pathTokenRotationMs?: number;
}

interface Leaf {
  fingerprint256: string;
  notBefore: Date;
  notAfter: Date;
  renewAt: Date;
  issuer: string;
}

export class DynamicServingSource implements CertificateSource {
  private sink: CertificateSink | undefined;
  private leaf: Leaf | undefined;
  /** The CA that signed the leaf served now. */
  private leafIssuer: CertificateInfo | undefined;
  /** When this replica first saw each CA in every caBundle (epoch ms). */
  private readonly trustedSince = new Map<string, number>();
  /** One key: a pass at a time, a change during a pass brings one more, failures retried with backoff. */
  private readonly queue: WorkQueue;
  private running = new AbortController();
  private informers: Informer[] = [];
  private failures = 0;
  private lastError: string | undefined;
  private readonly store: TlsSecretStore;
  private readonly injector: WebhookInjector;
  private readonly tokens: PathTokens;
  private readonly log: Logger;
  private readonly now: () => Date;
  private readonly where: string;

  constructor(private readonly o: DynamicServingOptions) {
    this.where = `${o.secretNamespace}/${o.secretName}`;
    this.log = o.log.child({ tlsSecret: this.where });
    this.now = o.now ?? (() => new Date());
    const events =
      o.events ??
      new EventRecorder({
        client: o.client,
        controller: 'kd-connections.hpe.com/admission',
        instance: o.identity,
        log: this.log,
      });
    this.store = new TlsSecretStore({ ...o, namespace: o.secretNamespace, name: o.secretName, events });
    this.injector = new WebhookInjector(
      o.webhookClient ?? webhookConfigurationClient(o.client),
      o.webhookConfigurations,
      o.webhookRoutes ?? (() => undefined),
      { log: this.log, now: this.now, ...(o.pruneAfterMs !== undefined ? { pruneAfterMs: o.pruneAfterMs } : {}) },
    );
    this.tokens = new PathTokens(pathTokenClock(o.pathTokenRotationMs ?? PATH_TOKEN_ROTATION_MS), this.now);
    this.queue = new WorkQueue(
      async (_key, signal) => {
        const wake = await this.sync(signal);
        // At least a second: a due time already past must not spin.
        return wake && { requeueAfterMs: Math.max(1_000, wake.getTime() - this.now().getTime()) };
      },
      {
        concurrency: 1,
        baseDelayMs: o.backoff?.initialMs ?? 1_000,
        maxDelayMs: o.backoff?.maxMs ?? 60_000,
        onResult: (_key, outcome, _ms, e, retryInMs) => {
          if (outcome === 'error') {
            this.lastError = errorMessage(e);
            const error = this.lastError;
            const serving = this.leaf?.fingerprint256 ?? null;
            this.log.error('certificate bootstrap failed; retrying', {
              error,
              failures: ++this.failures,
              retryInMs,
              serving,
            });
            this.store.record('Warning', 'CertificateBootstrapFailed', 'Bootstrap', `${error} (retrying)`);
          } else if (outcome === 'success' || outcome === 'requeue') {
            if (this.failures > 0) this.log.info('certificate bootstrap recovered', { failures: this.failures });
            [this.failures, this.lastError] = [0, undefined];
          }
        },
      },
    );
  }

  async start(sink: CertificateSink): Promise<void> {
    this.sink = sink;
    this.running = new AbortController();
    // The queue's backoff starts afresh on start(); so does the count the log gives.
    this.failures = 0;
    this.queue.start(this.running.signal);
    if (this.o.watch !== false) this.startWatches();
    await this.reconcile();
  }

  stop(): void {
    this.running.abort();
    const informers = this.informers.splice(0);
    void Promise.all([this.queue.stop(), ...informers.map((i) => i.stop())]).finally(() => this.o.client.close());
  }

  /** One pass (or joins the pass under way and runs another after it); never rejects. */
  reconcile(): Promise<void> {
    this.queue.add('ca');
    return this.queue.whenIdle();
  }

  /** False while no valid certificate is served, or (with a path token) while no token is known. */
  notReadyReasons(): string[] {
    const why = this.lastError ? `: ${this.lastError}` : '';
    const leaf = this.leaf;
    if (!leaf) return [`no serving certificate from the CA in Secret ${this.where} yet${why}`];
    if (this.o.pathToken && !this.tokens.hasKey) return [`no webhook path key from Secret ${this.where} yet${why}`];
    const t = this.now().getTime();
    if (t >= leaf.notAfter.getTime()) return [`serving certificate expired at ${leaf.notAfter.toISOString()}${why}`];
    if (t < leaf.notBefore.getTime()) return [`serving certificate not valid before ${leaf.notBefore.toISOString()}`];
    return [];
  }

  /** The path tokens a review may come with now (empty: no key known yet, so no review is served). */
  pathTokens(): readonly string[] {
    return this.o.pathToken ? this.tokens.accepted() : [];
  }

  /** The serving certificate in use (SHA-256 of the DER, lower-case hex), for tests and logs. */
  get servingFingerprint(): string | undefined {
    return this.leaf?.fingerprint256;
  }

  /** Brings the Secret, the configurations and the served leaf in line; returns when to look again. */
  private async sync(signal: AbortSignal): Promise<Date | undefined> {
    let secret = await this.store.read();
    let s = readCASecret(secret);
    let plan = planCA(secret, s, this.now());
    const errors: string[] = [];
    for (let round = 1; plan.write; round++) {
      if (secret?.immutable === true) {
        errors.push(this.blocked(plan, secret));
        break;
      }
      if (round > 3) throw new Error(`the Secret ${this.where} changed under each of 3 attempts to write it`);
      const written = await this.write(plan, secret, s);
      if (signal.aborted) return undefined;
      secret = written ?? (await this.store.read());
      s = readCASecret(secret);
      plan = planCA(secret, s, this.now());
    }
    this.tokens.learn(s);
    if (this.o.pathToken && !this.tokens.hasKey)
      errors.push(`Secret ${this.where} holds no valid webhook-path-key; delete it and it is created again`);
    const publish = this.o.pathToken ? this.tokens.toPublish() : undefined;
    // Without a token, the bare routes (taking back any token path, 0.1.0's too).
    const paths = !this.o.webhookRoutes ? undefined : !this.o.pathToken ? { token: undefined, keep: [] } : publish;
    const results = await this.injector.inject({
      trusted: trustedCAs(s, this.now(), this.o.servingLifetimeMs),
      allowPrune: !plan.write,
      ...(paths ? { paths } : {}),
    });
    errors.push(...results.filter((r) => r.error).map((r) => r.error!));
    if (paths && publish && results.every((r) => !r.error)) this.tokens.published(publish);
    const leafWait = await this.ensureLeaf(s, results, signal);
    if (errors.length > 0) throw new Error(errors.join('; '));
    return this.wakeAt(s, leafWait);
  }

  /** Creates the Secret or writes its new data; undefined when another replica wrote first. */
  private async write(plan: CAPlan, secret: SecretObject | undefined, s: CASecret): Promise<SecretObject | undefined> {
    const newCA =
      plan.write === 'new-ca'
        ? createCA({
            commonName: 'kd-connections-admission-ca',
            lifetimeMs: this.o.caLifetimeMs,
            keyPem: await generateKeyPem(this.o.keyBits),
            now: this.now(),
          })
        : undefined;
    // A deleted or broken Secret no longer names the CAs leaves are signed by: the caBundles and this
    // replica's leaf do, and those CAs stay trusted as previous ones.
    const serving = this.leaf && this.now() < this.leaf.notAfter ? this.leafIssuer : undefined;
    const inUse = newCA ? [...(await this.injector.publishedCAs()), ...(serving ? [serving] : [])] : [];
    const data = caSecretData(secret, s, {
      ...(newCA ? { newCA, inUse } : {}),
      now: this.now(),
      servingLifetimeMs: this.o.servingLifetimeMs,
      dropLegacyToken: plan.write === 'drop-legacy-token',
    });
    const { what, reason } = WRITES[!secret ? 'create' : plan.damaged ? 'repair' : plan.write!];
    if (plan.damaged) {
      this.log.warn('CA Secret is invalid; repairing it', { reasons: plan.reasons });
      this.store.record(
        'Warning',
        'CertificateSecretInvalid',
        'Repair',
        `${plan.reasons.join('; ')}; writing a new CA`,
        secret,
      );
    } else this.log.info(`CA Secret needs a write: ${what}`, { reasons: plan.reasons });
    const outcome = await this.store.write(secret, data);
    if ('conflict' in outcome) {
      this.log.info('another replica wrote the Secret first; using theirs', { detail: outcome.conflict });
      return undefined;
    }
    const ca = readCASecret(outcome.written).ca?.info;
    this.log.info(what, {
      resourceVersion: outcome.written.metadata.resourceVersion ?? null,
      ca: ca?.fingerprint256 ?? null,
      notAfter: ca?.notAfter.toISOString() ?? null,
    });
    this.store.record(
      'Normal',
      reason,
      secret ? 'Renew' : 'Create',
      `${what}: CA ${ca?.fingerprint256.slice(0, 23)} valid until ${ca?.notAfter.toISOString()}`,
      outcome.written,
    );
    return outcome.written;
  }

  /** Reports a write an immutable Secret cannot take, and returns the error that keeps the pass failing. */
  private blocked(plan: CAPlan, secret: SecretObject): string {
    const message = `cannot write a new CA: the Secret is immutable (${plan.reasons.join('; ')}); delete it and it is created again`;
    this.log.warn('CA Secret needs a write but cannot take one', { reasons: plan.reasons });
    this.store.record('Warning', 'CertificateSecretInvalid', 'Repair', message, secret);
    return `Secret ${this.where}: ${message}`;
  }

  /**
   * Signs a new leaf when none is served, the CA changed or renewal is due — once the CA has been in every
   * caBundle for the propagation delay (else returns when it will have been).
   */
  private async ensureLeaf(s: CASecret, results: InjectResult[], signal: AbortSignal): Promise<Date | undefined> {
    const ca = s.ca;
    const now = this.now();
    if (!ca) {
      if (!this.leaf) throw new Error(`Secret ${this.where} holds no usable CA (${s.problems.join('; ')})`);
      return undefined;
    }
    const fp = ca.info.fingerprint256;
    const leaf = this.leaf;
    if (leaf && leaf.issuer === fp && now < leaf.renewAt) return undefined;
    if (!results.every((r) => !r.exists || r.cas.some((c) => c.fingerprint256 === fp))) {
      this.trustedSince.delete(fp);
      throw new Error(`not signing from CA ${fp.slice(0, 23)} yet: it is not in every caBundle`);
    }
    const since = this.trustedSince.get(fp) ?? now.getTime();
    this.trustedSince.set(fp, since);
    const ready = since + (this.o.caPropagationDelayMs ?? CA_PROPAGATION_DELAY_MS);
    if (now.getTime() < ready) return new Date(ready);
    const signed = createServingCert({
      ca,
      ...this.o.wanted,
      lifetimeMs: this.o.servingLifetimeMs,
      keyPem: await generateKeyPem(this.o.keyBits),
      now,
    });
    if (signal.aborted) return undefined;
    this.sink!.setCertificate(signed.certPem, signed.keyPem);
    const info = inspectCertificate(signed.certPem);
    this.leafIssuer = ca.info;
    this.leaf = {
      fingerprint256: info.fingerprint256,
      notBefore: info.notBefore,
      notAfter: info.notAfter,
      renewAt: renewAt(info),
      issuer: fp,
    };
    this.log.info('serving certificate signed', {
      fingerprint: info.fingerprint256,
      ca: fp,
      notAfter: info.notAfter.toISOString(),
    });
    return undefined;
  }

  /** The next moment something changes without an event. */
  private wakeAt(s: CASecret, leafWait: Date | undefined): Date | undefined {
    const t = this.now().getTime();
    const times = [leafWait, this.leaf?.renewAt, s.ca && renewAt(s.ca.info), this.injector.pruneDueAt()];
    if (s.ca) for (const p of s.previous) times.push(previousTrustedUntil(p, s.ca.info, this.o.servingLifetimeMs));
    if (this.o.pathToken) times.push(...this.tokens.wakeTimes());
    if (s.legacyIssuedAt) times.push(new Date(s.legacyIssuedAt.getTime() + LEGACY_TOKEN_MAX_AGE_MS));
    const future = times.filter((d): d is Date => d !== undefined && d.getTime() > t).map((d) => d.getTime());
    return future.length > 0 ? new Date(Math.min(...future)) : undefined;
  }

  private startWatches(): void {
    // Only triggers: every pass reads live, so nothing is cached but names and versions. The events of
    // one change (an edit, our own write) come in a burst: one pass 100 ms after the first serves them all.
    const kick = () => this.queue.addAfter('ca', 100);
    const watch = (name: string, path: string, objectName: string) => {
      const fieldSelector = `metadata.name=${objectName}`;
      const i = new Informer({ name, client: this.o.client, path, fieldSelector, metadataOnly: true, log: this.log });
      i.on('add', kick).on('update', kick).on('delete', kick).start();
      this.informers.push(i);
    };
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
