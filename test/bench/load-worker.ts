/**
 * The load generator of the direct admission benchmark, a process of its own (forked with IPC) so it
 * never shares an event loop with the server under test. Keep-alive HTTPS connections, no pipelining
 * (the API server never pipelines), bounded by duration.
 * - Full load: autocannon, each connection sending its next request as soon as the last is answered.
 *   Every 2xx latency is kept at full resolution (autocannon's own histogram has 1 ms buckets).
 * - Fixed rate: an open-loop generator of its own. autocannon's rate limit sends each second's quota
 *   in a burst at the start of the second, which measures queueing behind the burst, not latency at a
 *   rate. Here request i is due at start + i/rate, and its latency is counted from when it was due, so
 *   a stalled server is charged for the requests that waited (no coordinated omission).
 *
 * IPC: the parent sends a LoadSpec; this process answers with a LoadResult, and exits on disconnect.
 */
import https from 'node:https';
import autocannon from 'autocannon';
import { summarize, type Summary } from './stats.js';

export interface LoadSpec {
  url: string;
  connections: number;
  durationSec: number;
  /** Requests per second over all connections; absent = as fast as the server answers. */
  rate?: number;
  requests: { method: 'POST'; path: string; headers: Record<string, string>; body: string }[];
}

export interface LoadResult {
  sent: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  durationSec: number;
  rps: number;
  latencyMs: Summary;
}

function paced(spec: LoadSpec & { rate: number }): Promise<LoadResult> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: spec.connections, rejectUnauthorized: false });
  const url = new URL(spec.url);
  const bodies = spec.requests.map((r) => Buffer.from(r.body));
  const interval = 1000 / spec.rate;
  const total = Math.round(spec.rate * spec.durationSec);
  const samples = new Float64Array(total);
  const counts = { ok: 0, non2xx: 0, errors: 0, timeouts: 0 };
  let sent = 0;
  let finished = 0;
  let last = 0;
  const start = performance.now() + 20;
  return new Promise((resolve) => {
    const finish = () => {
      last = performance.now();
      if (++finished < total) return;
      agent.destroy();
      const durationSec = (last - start) / 1000;
      resolve({
        sent,
        ...counts,
        durationSec,
        rps: counts.ok / durationSec,
        latencyMs: summarize(samples.subarray(0, counts.ok)),
      });
    };
    const fire = (i: number, due: number) => {
      const r = spec.requests[i % spec.requests.length]!;
      const body = bodies[i % bodies.length]!;
      const req = https.request(
        {
          host: url.hostname,
          port: url.port,
          path: r.path,
          method: r.method,
          headers: { ...r.headers, 'content-length': body.length },
          agent,
          timeout: 10_000,
        },
        (res) => {
          res.on('data', () => {});
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300) samples[counts.ok++] = performance.now() - due;
            else counts.non2xx++;
            finish();
          });
        },
      );
      let timedOut = false;
      req.on('timeout', () => {
        timedOut = true;
        counts.timeouts++;
        req.destroy(new Error('timeout'));
      });
      req.on('error', () => {
        if (!timedOut) counts.errors++;
        finish();
      });
      req.end(body);
    };
    const tick = () => {
      const now = performance.now();
      while (sent < total && start + sent * interval <= now) {
        fire(sent, start + sent * interval);
        sent++;
      }
      if (sent < total) setTimeout(tick, Math.max(0, start + sent * interval - performance.now()));
    };
    setTimeout(tick, 20);
  });
}

async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  if (spec.rate) return paced({ ...spec, rate: spec.rate });
  let samples = new Float64Array(1 << 16);
  let n = 0;
  let started = 0;
  let ended = 0;
  let instance!: autocannon.Instance;
  const finished = new Promise<autocannon.Result>((ok, fail) => {
    instance = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        pipelining: 1,
        duration: spec.durationSec,
        timeout: 10,
        requests: spec.requests,
      },
      (err, result) => (err ? fail(err) : ok(result)),
    );
  });
  instance.on('start', () => (started = performance.now()));
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    ended = performance.now();
    if (status < 200 || status >= 300) return;
    if (n === samples.length) {
      const bigger = new Float64Array(samples.length * 2);
      bigger.set(samples);
      samples = bigger;
    }
    samples[n++] = ms;
  });
  const r = await finished;
  const durationSec = started && ended > started ? (ended - started) / 1000 : r.duration;
  return {
    sent: r.requests.sent,
    ok: r['2xx'],
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    durationSec,
    rps: r['2xx'] / durationSec,
    latencyMs: summarize(samples.subarray(0, n)),
  };
}

process.on('message', (spec: LoadSpec) => {
  runLoad(spec).then(
    (result) => process.send!({ result }),
    (e: Error) => process.send!({ error: e.message }),
  );
});
process.on('disconnect', () => process.exit(0));
