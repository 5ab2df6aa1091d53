/** The release's pure parts: what it reads from Chart.yaml and the values that pin what it pushed. */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { chartVersions, releasedValuesYaml, releaseValues } from '../../images/src/release.js';
import { repoRoot } from '../support/processes.js';

describe('release', () => {
  it('takes the chart version and appVersion from Chart.yaml', () => {
    const v = chartVersions(repoRoot);
    expect(v.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(v.appVersion).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('pins each image by digest under the target registry, and refuses a release missing one', () => {
    const d = (c: string) => `sha256:${c.repeat(64)}`;
    expect(releaseValues('127.0.0.1:5000', { admission: d('a'), reconciler: d('b'), guestconfig: d('c') })).toEqual([
      'image.registry=127.0.0.1:5000',
      `admission.image.digest=${d('a')}`,
      `reconciler.image.digest=${d('b')}`,
      `webhook.podWebhook.image.digest=${d('c')}`,
    ]);
    expect(() => releaseValues('r.example/org', { admission: d('a'), reconciler: d('b') })).toThrow(
      'release: no digest for the guestconfig image',
    );
  });
});

describe('the released chart', () => {
  const values = readFileSync(join(repoRoot, 'charts', 'kd-connections', 'values.yaml'), 'utf8');

  it("defaults to the release's registry: image.registry is the only value that changes", () => {
    const released = parse(releasedValuesYaml(values, 'registry.example.com/team'));
    const source = parse(values);
    expect(released.image.registry).toBe('registry.example.com/team');
    expect({ ...released, image: { ...released.image, registry: 'localhost' } }).toEqual(source);
  });

  it('refuses a values.yaml whose registry line moved', () => {
    expect(() => releasedValuesYaml(values.replace('  registry: localhost', '  registry: other'), 'r')).toThrow(
      'expected one "  registry: localhost" line, under image:',
    );
    expect(() => releasedValuesYaml(`other:\n  registry: localhost\n`, 'r')).toThrow('under image:');
  });
});
