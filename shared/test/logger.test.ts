import { describe, expect, it } from '@jest/globals';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { batchedStdout, createLogger, flushLogs } from '../src/runtime/logger.js';

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
});
