/** The node-agent prototype's write: whole documents, mode 0644, and names planted by the container replaced, not followed. */
import { describe, expect, it } from '@jest/globals';
import { lstatSync, mkdtempSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AGENT_LABEL, AGENT_VOLUME, onAgentPath, writeConfigmeta } from './node-agent.js';

const fresh = () => mkdtempSync(join(tmpdir(), 'kd-agent-'));

describe('writeConfigmeta', () => {
  it('writes the document 0644 and replaces the last one, leaving no temporary file', () => {
    const dir = fresh();
    writeConfigmeta(dir, '{"v":1}');
    writeConfigmeta(dir, '{"v":2}');
    expect(readFileSync(join(dir, 'configmeta.json'), 'utf8')).toBe('{"v":2}');
    expect(statSync(join(dir, 'configmeta.json')).mode & 0o777).toBe(0o644);
    expect(readdirSync(dir)).toEqual(['configmeta.json']);
  });

  it('replaces a symlink planted as configmeta.json or as its temporary name without writing its target', () => {
    const dir = fresh();
    const target = join(fresh(), 'host-file');
    writeFileSync(target, 'host content');
    symlinkSync(target, join(dir, 'configmeta.json'));
    symlinkSync(target, join(dir, '.configmeta.json.agent-tmp'));
    writeConfigmeta(dir, '{"v":3}');
    expect(readFileSync(target, 'utf8')).toBe('host content');
    expect(lstatSync(join(dir, 'configmeta.json')).isSymbolicLink()).toBe(false);
    expect(readFileSync(join(dir, 'configmeta.json'), 'utf8')).toBe('{"v":3}');
  });
});

describe('onAgentPath', () => {
  it('opts the pod out of the sidecar and mounts the agent volume on /etc/guestconfig in every container', () => {
    const pod = {
      metadata: { name: 'kd-3', labels: { a: 'b' } },
      spec: { containers: [{ name: 'app' }, { name: 'other', volumeMounts: [{ name: 'x', mountPath: '/x' }] }] },
    };
    const p = onAgentPath(pod);
    expect(p.metadata.labels).toEqual({ a: 'b', [AGENT_LABEL]: 'node-agent' });
    expect(p.metadata.annotations).toEqual({ 'kubedirector.hpe.com/configmeta-volume': 'false' });
    expect(p.spec.volumes).toEqual([{ name: AGENT_VOLUME, emptyDir: { medium: 'Memory' } }]);
    expect(p.spec.containers.map((c: { volumeMounts: unknown[] }) => c.volumeMounts.at(-1))).toEqual([
      { name: AGENT_VOLUME, mountPath: '/etc/guestconfig' },
      { name: AGENT_VOLUME, mountPath: '/etc/guestconfig' },
    ]);
    expect(pod.metadata).toEqual({ name: 'kd-3', labels: { a: 'b' } });
  });
});
