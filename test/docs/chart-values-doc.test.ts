/** The chart README's "Values that matter" is what values.yaml's "(matters)" comments say, and small. */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { repoPath } from '../support/processes.js';
import { mattersRows, withMattersTable } from './chart-values-doc.js';

const readme = readFileSync(repoPath('charts/kd-connections/README.md'), 'utf8');
const values = readFileSync(repoPath('charts/kd-connections/values.yaml'), 'utf8');

describe('the chart README', () => {
  it('has the values table values.yaml generates (run `npm run docs:chart` after changing a "(matters)" comment)', () => {
    expect(readme).toBe(withMattersTable(readme, values));
  });

  it('lists each marked key with its real default and its comment', () => {
    const rows = mattersRows(values);
    expect(rows.length).toBeGreaterThanOrEqual(15);
    const parsed = parse(values) as Record<string, unknown>;
    const at = (path: string) => path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], parsed);
    const byPath = Object.fromEntries(rows.map(([p, d, t]) => [p, { d, t }]));
    expect(byPath['certificates.mode']).toEqual({
      d: '`bootstrap`',
      t: expect.stringMatching(/^How the admission service/),
    });
    expect(byPath['watchNamespaces']?.d).toBe('`[]`');
    expect(byPath['systemNamespace']?.d).toBe('`""`');
    expect(byPath['reconciler.firstDeliveryWait']?.d).toBe(`\`${at('reconciler.firstDeliveryWait') as string}\``);
    for (const [path] of rows) expect({ path, exists: at(path) !== undefined }).toEqual({ path, exists: true });
  });

  it('stays under 15 KB (the rest is in docs/)', () => {
    expect(Buffer.byteLength(readme)).toBeLessThan(15 * 1024);
  });
});
