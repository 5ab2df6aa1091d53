import { describe, expect, it } from '@jest/globals';
import { HOOK_EXCERPT_CHARS, hookOutputExcerpt, MASK } from '../src/plan/hook-output.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('hookOutputExcerpt', () => {
  it('masks every value as given and in base64, the longer of two overlapping values whole', () => {
    const out = hookOutputExcerpt(`a=s3cret-long b=s3cret c=${b64('s3cret')} d=ok`, ['s3cret', 's3cret-long']);
    expect(out).toBe(`a=${MASK} b=${MASK} c=${MASK} d=ok`);
  });

  it('masks a value the text starts in the middle of (the text is itself a tail)', () => {
    expect(hookOutputExcerpt('ret-value then more', ['my-secret-value'])).toBe(`${MASK} then more`);
  });

  it('leaves values shorter than four characters alone (they would blank ordinary words)', () => {
    expect(hookOutputExcerpt('a ab abc', ['ab', 'abc'])).toBe('a ab abc');
  });

  it('is one line without control characters, and keeps the end within the bound', () => {
    const out = hookOutputExcerpt(`${'x'.repeat(1000)}\n\u001b[1mfailed:\tno route\r\n`, []);
    // eslint-disable-next-line no-control-regex -- asserting that no control character is left
    expect(out).not.toMatch(/[\u0000-\u001f]/);
    expect(out.endsWith('[1mfailed: no route')).toBe(true);
    expect(out).toHaveLength(HOOK_EXCERPT_CHARS);
    expect(out.startsWith('…')).toBe(true);
    // Masked before the cut: a value straddling the bound never shows in part.
    const value = 'v'.repeat(40);
    const cut = hookOutputExcerpt(`${value}${'y'.repeat(HOOK_EXCERPT_CHARS - 5)}`, [value]);
    expect(cut).not.toContain('v');
  });

  it('masks a value printed without its trailing newline, and base64 as the base64 command wraps it', () => {
    const value = 'k'.repeat(70) + '\n';
    const b64wrapped = Buffer.from('k'.repeat(70))
      .toString('base64')
      .replace(/(.{76})/g, '$1\n');
    const out = hookOutputExcerpt(`plain ${'k'.repeat(70)} wrapped ${b64wrapped}`, [value], 10_000);
    expect(out).not.toContain('kkkk');
    expect(out).not.toMatch(/a2tr/);
    expect(out).toContain(`plain ${MASK} wrapped ${MASK}`);
  });
});
