import { describe, expect, it } from '@jest/globals';
import { Expectations, rvAtLeast } from '../src/expectations.js';

describe('Expectations', () => {
  it('holds a key until the written resourceVersion is observed', () => {
    let now = 1000;
    const e = new Expectations(5000, () => now);
    e.expect('pod:ns/a', '42');
    expect(e.waitFor(['pod:ns/a', 'pod:ns/b'])).toBe(5000);
    e.observe('pod:ns/a', '41'); // an older version: still stale
    expect(e.waitFor(['pod:ns/a'])).toBe(5000);
    now += 1000;
    expect(e.waitFor(['pod:ns/a'])).toBe(4000);
    e.observe('pod:ns/a', '42');
    expect(e.waitFor(['pod:ns/a'])).toBe(0);
    expect(e.size).toBe(0);
  });

  it('a deleted object clears its expectation', () => {
    const e = new Expectations();
    e.expect('kdcluster:ns/x', '7');
    e.observe('kdcluster:ns/x', undefined);
    expect(e.waitFor(['kdcluster:ns/x'])).toBe(0);
  });

  it('expires, so a missed watch event delays work but never stalls it', () => {
    let now = 0;
    const e = new Expectations(100, () => now);
    e.expect('pod:ns/a', '1');
    now = 100;
    expect(e.waitFor(['pod:ns/a'])).toBe(0);
    expect(e.size).toBe(0);
  });

  it('ignores writes without a resourceVersion', () => {
    const e = new Expectations();
    e.expect('pod:ns/a', undefined);
    expect(e.waitFor(['pod:ns/a'])).toBe(0);
  });
});

describe('rvAtLeast', () => {
  it('compares decimal resourceVersions as numbers and anything else for equality', () => {
    expect(rvAtLeast('10', '9')).toBe(true);
    expect(rvAtLeast('9', '10')).toBe(false);
    expect(rvAtLeast('123456789012345678901', '123456789012345678900')).toBe(true);
    expect(rvAtLeast('abc', 'abc')).toBe(true);
    expect(rvAtLeast('abd', 'abc')).toBe(false);
    expect(rvAtLeast(undefined, '1')).toBe(false);
  });

  it('a later version observed also clears an expectation (the cache moved past our write)', () => {
    const e = new Expectations();
    e.expect('pod:ns/a', '42');
    e.observe('pod:ns/a', '45');
    expect(e.waitFor(['pod:ns/a'])).toBe(0);
  });

  it('an answer that arrives after a later write of the same object does not lower what is expected', () => {
    const e = new Expectations();
    e.expect('kdcluster:ns/a', '11'); // the reconnect record's patch answered first
    e.expect('kdcluster:ns/a', '10'); // then the delivery pass's, written before it
    e.observe('kdcluster:ns/a', '10');
    expect(e.waitFor(['kdcluster:ns/a'])).toBeGreaterThan(0);
    e.observe('kdcluster:ns/a', '11');
    expect(e.waitFor(['kdcluster:ns/a'])).toBe(0);
  });
});
