import { describe, expect, it } from '@jest/globals';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { batchedStdout, createLogger, FLUSH_BYTES, FLUSH_INTERVAL_MS, flushLogs } from '../src/logger.js';

describe('logger', () => {
  it('writes one JSON object per line with the component, level, message and fields', () => {
    const lines: string[] = [];
    const log = createLogger({ component: 'test', level: 'info', write: (l) => lines.push(l) }).child({
      cluster: 'ml/a',
    });
    log.debug('hidden');
    log.info('review', { uid: 'u1', decision: 'allowed', latencyMs: 1.5 });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 'info',
      component: 'test',
      msg: 'review',
      cluster: 'ml/a',
      uid: 'u1',
      latencyMs: 1.5,
    });
  });

  it('batches lines into few writes, keeps their order, and flushLogs waits until they are written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kd-log-'));
    const file = join(dir, 'out');
    const fd = openSync(file, 'w');
    const write = batchedStdout(fd);
    for (let i = 0; i < 1000; i++) write(`line ${i}`);
    await new Promise((r) => setImmediate(r));
    write('after the first batch');
    await flushLogs();
    closeSync(fd);
    const got = readFileSync(file, 'utf8').trimEnd().split('\n');
    rmSync(dir, { recursive: true, force: true });
    expect(got).toHaveLength(1001);
    expect(got[0]).toBe('line 0');
    expect(got[999]).toBe('line 999');
    expect(got[1000]).toBe('after the first batch');
  });

  it('holds lines for a short window so that a busy service writes them in few batches', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kd-log-'));
    const file = join(dir, 'out');
    const fd = openSync(file, 'w');
    const write = batchedStdout(fd);
    write('first');
    write('second');
    // One event-loop turn later nothing is written yet: the window (FLUSH_INTERVAL_MS) is still open.
    await new Promise((r) => setImmediate(r));
    expect(readFileSync(file, 'utf8')).toBe('');
    await flushLogs();
    expect(readFileSync(file, 'utf8')).toBe('first\nsecond\n');
    // A full batch does not wait for the window.
    const big = 'x'.repeat(FLUSH_BYTES);
    write(big);
    await new Promise((r) => setTimeout(r, FLUSH_INTERVAL_MS / 2));
    await new Promise((r) => setImmediate(r));
    const afterBig = readFileSync(file, 'utf8');
    await flushLogs();
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
    expect(afterBig).toBe(`first\nsecond\n${big}\n`);
  });
});
