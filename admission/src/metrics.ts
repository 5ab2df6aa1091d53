/**
 * Prometheus metrics of the admission service, on a registry of its own (so several instances can
 * live in one test process). Labels are bounded: webhook names, operations and a handful of results.
 * process_* and nodejs_* are prom-client's default metrics, unprefixed like every other exporter's, so
 * the usual process and runtime dashboards find them; certificate expiry follows cert-manager's
 * `*_expiration_timestamp_seconds`. The three controller_runtime_webhook_* series are named, labelled and
 * bucketed as controller-runtime's webhook server exports them (`webhook` is the registered path, `code`
 * the HTTP status), so dashboards and alerts written for Go webhooks work unchanged.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** allowed | patched | denied: a decision; rejected: a 4xx before a decision; error: a 5xx. */
export type RequestResult = 'allowed' | 'patched' | 'denied' | 'rejected' | 'error';

export class AdmissionMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'webhook' | 'operation' | 'result'>;
  readonly duration: Histogram<'webhook'>;
  readonly latency: Histogram<'webhook'>;
  readonly webhookInFlight: Gauge<'webhook'>;
  readonly lookups: Counter<'kind' | 'source'>;
  readonly tlsReloads: Counter<'result'>;
  readonly tlsNotAfter: Gauge;
  readonly tlsConnectionsRecycled: Counter;
  readonly informerRestarts: Counter<'informer' | 'reason'>;
  private readonly cacheObjects: Gauge<'cache'>;
  // Counted here and handed to prom-client on a scrape: its inc() hashes and validates the label object
  // every time, nine times per review (a request and eight lookups). Label values come from closed sets.
  private readonly requestCounts = new Map<string, Counted>();
  private readonly lookupCounts = new Map<string, Counted>();
  private readonly webhookCounts = new Map<string, Counted>();
  private readonly ready: Gauge;
  readonly inFlight: Gauge;
  readonly queued: Gauge;
  readonly refusedBusy: Counter<'webhook' | 'reason'>;
  readonly pathRefused: Counter;

  constructor(
    opts: {
      defaultMetrics?: boolean;
      cacheSizes?: () => Record<string, number>;
      ready?: () => boolean;
      /** The most reviews in flight at once since the start. */
      inFlightMax?: () => number;
    } = {},
  ) {
    const registers = [this.registry];
    const requestCounts = this.requestCounts;
    this.requests = new Counter({
      name: 'kd_admission_requests_total',
      help: 'Admission requests by webhook, operation and result (allowed, patched, denied, rejected, error)',
      labelNames: ['webhook', 'operation', 'result'],
      registers,
      collect() {
        publish(this, requestCounts);
      },
    });
    const webhookCounts = this.webhookCounts;
    new Counter({
      name: 'controller_runtime_webhook_requests_total',
      help: 'Total number of admission requests by HTTP status code',
      labelNames: ['webhook', 'code'],
      registers,
      collect() {
        publish(this, webhookCounts);
      },
    });
    this.latency = new Histogram({
      name: 'controller_runtime_webhook_latency_seconds',
      help: 'Histogram of the latency of processing admission requests',
      labelNames: ['webhook'],
      registers,
    });
    this.webhookInFlight = new Gauge({
      name: 'controller_runtime_webhook_requests_in_flight',
      help: 'Current number of admission requests being served',
      labelNames: ['webhook'],
      registers,
    });
    this.duration = new Histogram({
      name: 'kd_admission_request_duration_seconds',
      help: 'Deprecated (removed in 0.3.0): use controller_runtime_webhook_latency_seconds. Time from the first byte of a review to its answer',
      labelNames: ['webhook'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    const lookupCounts = this.lookupCounts;
    this.lookups = new Counter({
      name: 'kd_admission_lookups_total',
      help: 'Object lookups by kind and source (cache, live, live_not_found)',
      labelNames: ['kind', 'source'],
      registers,
      collect() {
        publish(this, lookupCounts);
      },
    });
    this.tlsReloads = new Counter({
      name: 'kd_admission_tls_reloads_total',
      help: 'Serving certificate loads by result (loaded, rejected)',
      labelNames: ['result'],
      registers,
    });
    this.tlsNotAfter = new Gauge({
      name: 'kd_admission_tls_certificate_expiration_timestamp_seconds',
      help: 'The date after which the serving certificate in use expires, as a Unix timestamp',
      registers,
    });
    this.tlsConnectionsRecycled = new Counter({
      name: 'kd_admission_tls_connections_recycled_total',
      help: 'Kept-alive connections answered with Connection: close because their certificate was replaced since',
      registers,
    });
    this.informerRestarts = new Counter({
      name: 'kd_admission_informer_restarts_total',
      help: 'Watch restarts other than normal timeouts, by informer and reason',
      labelNames: ['informer', 'reason'],
      registers,
    });
    const sizes = opts.cacheSizes;
    this.cacheObjects = new Gauge({
      name: 'kd_admission_cache_objects',
      help: 'Objects held by each cache',
      labelNames: ['cache'],
      registers,
      collect() {
        if (!sizes) return;
        this.reset();
        for (const [cache, n] of Object.entries(sizes())) this.set({ cache }, n);
      },
    });
    const ready = opts.ready;
    this.ready = new Gauge({
      name: 'kd_admission_ready',
      help: '1 when caches are synced, TLS is loaded and the service is not shutting down',
      registers,
      collect() {
        if (ready) this.set(ready() ? 1 : 0);
      },
    });
    this.inFlight = new Gauge({
      name: 'kd_admission_reviews_in_flight',
      help: 'Reviews being read and decided now (at most --max-in-flight)',
      registers,
    });
    const inFlightMax = opts.inFlightMax;
    new Gauge({
      name: 'kd_admission_reviews_in_flight_max',
      help: 'The most reviews in flight at once since the process started',
      registers,
      collect() {
        if (inFlightMax) this.set(inFlightMax());
      },
    });
    this.queued = new Gauge({
      name: 'kd_admission_reviews_queued',
      help: 'Reviews waiting for a turn (at most --max-queued), their bodies not read yet',
      registers,
    });
    this.refusedBusy = new Counter({
      name: 'kd_admission_reviews_refused_busy_total',
      help: 'Reviews answered 429 without a decision: the queue was full, or no turn came within the deadline',
      labelNames: ['webhook', 'reason'],
      registers,
    });
    this.pathRefused = new Counter({
      name: 'kd_admission_reviews_refused_path_total',
      help: 'POSTs answered 404 without reading the body: not at a webhook path behind a current path token',
      registers,
    });
    if (opts.defaultMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** One answered review: `code` is the HTTP status sent. */
  observe(
    webhook: { name: string; path: string },
    operation: string,
    result: RequestResult,
    code: number,
    seconds: number,
  ): void {
    const { name, path } = webhook;
    count(this.requestCounts, `${name} ${operation} ${result}`, { webhook: name, operation, result });
    count(this.webhookCounts, `${path} ${code}`, { webhook: path, code: String(code) });
    this.latency.observe({ webhook: path }, seconds);
    this.duration.observe({ webhook: name }, seconds);
  }

  /** A review told "busy" (reason: queue-full or deadline). */
  busy(webhook: string, reason: string): void {
    this.refusedBusy.inc({ webhook, reason });
  }

  /** One lookup answered by `source` (cache, live, live_not_found). */
  lookup(kind: string, source: string): void {
    count(this.lookupCounts, `${kind} ${source}`, { kind, source });
  }
}

interface Counted {
  labels: Record<string, string>;
  n: number;
}

function count(counts: Map<string, Counted>, key: string, labels: Record<string, string>): void {
  const c = counts.get(key);
  if (c) c.n++;
  else counts.set(key, { labels, n: 1 });
}

/** The counts so far as the counter's values (a scrape only; the counts only grow). */
function publish(counter: Counter<string>, counts: Map<string, Counted>): void {
  counter.reset();
  for (const { labels, n } of counts.values()) counter.inc(labels, n);
}
