/**
 * Serving certificate and key from files (a mounted Secret, cert-manager), reloaded when they change:
 * the directories are watched (a Secret volume swaps a `..data` symlink, so watching the files alone
 * misses updates) and polled as a fallback, like controller-runtime's certwatcher. A pair that does
 * not load (half-written, key and certificate from different rotations) is skipped; the next change or
 * poll tries again, and the pair in use stays until then.
 */
import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { errorMessage, silentLogger, WorkQueue, type Logger } from '@kd-connections/shared/runtime';
import type { CertificateSink, CertificateSource } from './certificate.js';

export interface FileCertificateOptions {
  certFile: string;
  keyFile: string;
  /** Poll period (default 10 s, controller-runtime's). */
  pollIntervalMs?: number;
  /** Coalesces the burst of events one rotation produces (default 100 ms). */
  debounceMs?: number;
  /** Watch the directories (default true); polling alone is the fallback where watching fails. */
  watch?: boolean;
  log?: Logger;
}

export class FileCertificateSource implements CertificateSource {
  private sink: CertificateSink | undefined;
  private watchers: FSWatcher[] = [];
  private poller: NodeJS.Timeout | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private lastLoaded = '';
  private lastRejected = '';
  /** One check at a time; a change seen during one brings one more. checkOnce never throws. */
  private readonly checks = new WorkQueue(() => this.checkOnce(), { concurrency: 1 });
  private readonly log: Logger;

  constructor(private readonly opts: FileCertificateOptions) {
    this.log = (opts.log ?? silentLogger).child({ certFile: opts.certFile, keyFile: opts.keyFile });
  }

  async start(sink: CertificateSink): Promise<void> {
    this.sink = sink;
    this.checks.start();
    const dirs = this.opts.watch === false ? [] : [dirname(this.opts.certFile), dirname(this.opts.keyFile)];
    for (const dir of new Set(dirs)) {
      try {
        const w = watch(dir, () => this.schedule());
        w.on('error', (e) => this.log.warn('certificate directory watch failed; polling only', { error: e.message }));
        w.unref();
        this.watchers.push(w);
      } catch (e) {
        this.log.warn('cannot watch the certificate directory; polling only', { dir, error: errorMessage(e) });
      }
    }
    this.poller = setInterval(() => void this.check(), this.opts.pollIntervalMs ?? 10_000);
    this.poller.unref();
    await this.check();
  }

  stop(): void {
    for (const w of this.watchers) w.close();
    this.watchers = [];
    if (this.poller) clearInterval(this.poller);
    if (this.debounce) clearTimeout(this.debounce);
    void this.checks.stop();
  }

  private schedule(): void {
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = setTimeout(() => void this.check(), this.opts.debounceMs ?? 100);
    this.debounce.unref();
  }

  /** Reads both files and hands a changed pair to the sink; one check at a time. */
  check(): Promise<void> {
    this.checks.add('files');
    return this.checks.whenIdle();
  }

  private async checkOnce(): Promise<void> {
    let cert: string;
    let key: string;
    try {
      [cert, key] = await Promise.all([readFile(this.opts.certFile, 'utf8'), readFile(this.opts.keyFile, 'utf8')]);
    } catch (e) {
      if (this.lastRejected !== 'unreadable')
        this.log.warn('certificate files not readable yet', { error: errorMessage(e) });
      this.lastRejected = 'unreadable';
      return;
    }
    const digest = createHash('sha256').update(cert).update('\0').update(key).digest('hex');
    if (digest === this.lastLoaded || digest === this.lastRejected) return;
    try {
      this.sink?.setCertificate(cert, key);
      this.lastLoaded = digest;
      this.lastRejected = '';
    } catch (e) {
      this.lastRejected = digest;
      this.log.warn('certificate files not loaded; keeping the current pair', { error: errorMessage(e) });
    }
  }
}
