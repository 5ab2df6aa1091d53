/**
 * Looking at the processes under test from outside: Prometheus text from their /metrics, a review
 * POSTed once over HTTPS, the TLS parameters a server negotiates, CPU pinning with taskset, and forked
 * helper processes (run from their TypeScript sources, like the benchmark itself).
 */
import { execFile, fork, type ChildProcess } from 'node:child_process';
import https from 'node:https';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';

export function httpsPost(
  url: string,
  body: string,
  ca: string,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((ok, fail) => {
    const req = https.request(
      url,
      { method: 'POST', ca, agent: false, headers: { 'Content-Type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => ok({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

/** The protocol and cipher a client like the API server's gets from 127.0.0.1:port. */
export function negotiatedTls(port: number, ca: string): Promise<{ protocol: string; cipher: string }> {
  return new Promise((ok, fail) => {
    const s = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
      const r = { protocol: s.getProtocol() ?? '?', cipher: s.getCipher().name };
      s.end();
      ok(r);
    });
    s.on('error', fail);
  });
}

/** Pins every thread of `pid` to `cpu` (taskset); false when that is not possible here. */
export function pin(pid: number, cpu: number): Promise<boolean> {
  return new Promise((ok) => execFile('taskset', ['-a', '-pc', String(cpu), String(pid)], (err) => ok(!err)));
}

/** Forks a sibling .ts module of the benchmark with the same loader, with an IPC channel. */
export function forkHelper(file: string): ChildProcess {
  const path = fileURLToPath(new URL(file, import.meta.url));
  const loader = fileURLToPath(new URL('./ts-loader.mjs', import.meta.url));
  return fork(path, [], { execArgv: ['--import', loader], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

/** Sends a message and resolves with the first reply that has `key`. */
export function ask<T>(child: ChildProcess, msg: unknown, key: string, timeoutMs = 120_000): Promise<T> {
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => done(new Error(`no "${key}" reply within ${timeoutMs} ms`)), timeoutMs);
    const onMessage = (m: Record<string, unknown>) => {
      if (m.error) done(new Error(String(m.error)));
      else if (key in m) done(undefined, m[key] as T);
    };
    const onExit = (code: number | null) => done(new Error(`helper exited (${code}) before answering`));
    const done = (e?: Error, v?: T) => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      if (e) fail(e);
      else ok(v as T);
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
    child.send(msg as object);
  });
}

export async function stopHelper(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(t);
}
