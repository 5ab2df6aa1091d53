/**
 * Shared by the admission reliability tests and the soak: what a process costs (/proc), an HTTPS
 * request that always settles with an answer or a transport error, and the "endpoints controller" in
 * front of the loopback balancer of admission-certs-support.ts (only replicas whose /readyz answers 200
 * get NEW connections, as a Service drops a pod from its endpoints when readiness fails).
 */
import { readdirSync, readFileSync } from 'node:fs';
import https from 'node:https';
import type { Balancer } from '../e2e/admission-certs-support.js';

export interface ProcStatus {
  /** Resident set size now, KiB. */
  rssKiB: number;
  /** Peak resident set size since the process started, KiB. */
  hwmKiB: number;
  threads: number;
}

/** VmRSS, VmHWM and Threads of /proc/<pid>/status. */
export function procStatus(pid: number): ProcStatus {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => {
    const m = new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text);
    if (!m) throw new Error(`no ${name} in /proc/${pid}/status`);
    return Number(m[1]);
  };
  return { rssKiB: field('VmRSS'), hwmKiB: field('VmHWM'), threads: field('Threads') };
}

/** Open file descriptors of a process (entries of /proc/<pid>/fd). */
export function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

export const mib = (kib: number): number => Math.round((kib / 1024) * 10) / 10;

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  reusedSocket: boolean;
}

export interface Sent {
  method: string;
  path: string;
  headers: Record<string, string | number>;
  /** Sent as is; with no Content-Length header in `headers` Node sends it chunked. */
  body?: Buffer;
}

/**
 * One request; resolves with the answer even when the server answers before the body is sent (a 413)
 * and the rest of the write then fails. Rejects only when no answer came at all.
 */
export function send(port: number, s: Sent, opts: { ca: string; agent?: https.Agent | false }): Promise<Answer> {
  return new Promise((ok, fail) => {
    let answered = false;
    const req = https.request({
      host: '127.0.0.1',
      port,
      method: s.method,
      path: s.path,
      headers: s.headers,
      ca: opts.ca,
      agent: opts.agent ?? false,
    });
    req.on('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        ok({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks),
          reusedSocket: req.reusedSocket,
        }),
      );
      res.on('error', (e) => fail(e));
    });
    req.on('error', (e) => {
      if (!answered) fail(e);
    });
    req.end(s.body);
  });
}

export interface ReadinessRouting {
  /** Ports currently routed to. */
  routed(): number[];
  add(port: number): void;
  stop(): void;
}

/**
 * Polls GET /readyz of every backend every `intervalMs` (a kubelet readiness probe, much faster than
 * the default 10 s) and gives the balancer the ports that answered 200: a replica that turns unready
 * (SIGTERM) gets no new connections, connections already open stay, like endpoint removal.
 */
export function routeByReadiness(balancer: Balancer, ports: number[], ca: string, intervalMs = 100): ReadinessRouting {
  const all = new Set(ports);
  let routed: number[] = [...ports];
  balancer.setBackends(routed);
  let stopped = false;
  const probe = (port: number) =>
    new Promise<boolean>((ok) => {
      const req = https.get({ host: '127.0.0.1', port, path: '/readyz', ca, agent: false, timeout: 1000 }, (res) => {
        res.resume();
        ok(res.statusCode === 200);
      });
      req.on('timeout', () => req.destroy());
      req.on('error', () => ok(false));
    });
  const loop = async () => {
    while (!stopped) {
      const ready: number[] = [];
      for (const port of all) if (await probe(port)) ready.push(port);
      if (!stopped && ready.join() !== routed.join()) {
        routed = ready;
        balancer.setBackends(routed);
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  };
  void loop();
  return {
    routed: () => [...routed],
    add: (port) => void all.add(port),
    stop: () => void (stopped = true),
  };
}
