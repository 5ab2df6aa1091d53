/** The plugin's command line: kubectl's spellings, and a clear error (exit 2 with the usage) for a mistake. */
import { describe, expect, it } from '@jest/globals';
import { parseArgs, UsageError } from '../src/args.js';

describe('parseArgs', () => {
  it('graph and explain with kubectl’s flags, both spellings', () => {
    expect(parseArgs(['graph', '-n', 'ml', '-o', 'mermaid'])).toMatchObject({
      command: 'graph',
      namespace: 'ml',
      output: 'mermaid',
    });
    expect(parseArgs(['--namespace=ml', 'explain', 'notebook', '--context', 'kind'])).toMatchObject({
      command: 'explain',
      cluster: 'notebook',
      namespace: 'ml',
      context: 'kind',
      output: 'text',
      systemNamespace: 'kd-system',
    });
    expect(parseArgs(['graph', '--system-namespace', 'kubedirector']).systemNamespace).toBe('kubedirector');
    expect(parseArgs(['--help']).help).toBe(true);
  });

  it.each([
    [[], 'no command given'],
    [['grpah'], 'unknown command "grpah"'],
    [['graph', '-o', 'png'], '-o png: not one of text, mermaid, dot'],
    [['graph', 'x'], 'graph takes no name (got "x")'],
    [['explain'], 'explain takes one kdcluster name'],
    [['explain', 'a', '-o', 'dot'], 'explain prints text only (no -o)'],
    [['graph', '-n'], '-n needs a value'],
    [['graph', '--watch'], 'unknown option --watch'],
  ])('%j is refused: %s', (argv, message) => {
    let err: unknown;
    try {
      parseArgs(argv as string[]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UsageError);
    expect(err).toMatchObject({ message, usage: true });
  });
});

describe('parseArgs: kubectl’s other spellings, and names checked before any request', () => {
  it('-ojson-style and -n=ns forms', () => {
    expect(parseArgs(['graph', '-omermaid', '-n=ml'])).toMatchObject({ output: 'mermaid', namespace: 'ml' });
    expect(parseArgs(['graph', '-o=dot'])).toMatchObject({ output: 'dot' });
  });

  it.each([
    [
      ['explain', '../../api/v1/namespaces/ml/secrets/x'],
      '"../../api/v1/namespaces/ml/secrets/x" is not a valid kdcluster name',
    ],
    [['graph', '-n', 'ML'], '"ML" is not a valid namespace'],
    [['graph', '--system-namespace', 'a/b'], '"a/b" is not a valid system namespace'],
  ])('%j is refused before any request', (argv, start) => {
    expect(() => parseArgs(argv)).toThrow(start);
  });
});
