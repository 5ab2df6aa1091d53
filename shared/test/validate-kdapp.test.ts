/**
 * The kdapp admission rules: connectable_to well-formed, and a warning naming the existing connections
 * an update, or a re-created app, now forbids.
 */
import { describe, expect, it } from '@jest/globals';
import { formatFieldError } from '../src/domain/field-errors.js';
import type { ConnectableToEntry, KDApp, KDAppSpec } from '../src/domain/types.js';
import { checkConnectableTo, validateApp, type AppReview } from '../src/domain/validate-kdapp.js';
import { MemoryWorld, NS, SYSTEM_NS, app, cluster } from './fixtures.js';

const OPTS = { systemNamespace: SYSTEM_NS };
const NEITHER = 'is neither a version (e.g. "2.4.5") nor a valid semver range (e.g. ">=2.4 <3")';

const withRules = (connectable_to: unknown, extra: Partial<KDAppSpec> = {}): KDApp =>
  app('jupyter-notebook', {
    category: 'notebook',
    distroID: 'hpecp/jupyter-notebook',
    version: '1.3',
    connectable_to: connectable_to as ConnectableToEntry[],
    ...extra,
  });

describe('validateApp rule table: connectable_to well-formed', () => {
  const cases: { rule: string; connectable_to: unknown; extra?: Partial<KDAppSpec>; errors: string[] }[] = [
    { rule: 'absent (no restriction)', connectable_to: undefined, errors: [] },
    { rule: 'empty list (no cluster connections)', connectable_to: [], errors: [] },
    {
      rule: 'exact versions and ranges are valid',
      connectable_to: [
        { version: '2.4.5' },
        { version: '1.0' },
        { version: 'v3' },
        { version: '>=2.4 <3' },
        { version: '^7' },
        { version: '2.x' },
        { version: '~1.2' },
        { version: '1.2 - 1.4 || >=2' },
        { category: 'training', distroID: 'hpecp/training-engine', version: '1.2' },
      ],
      errors: [],
    },
    {
      rule: 'not a list',
      connectable_to: { category: 'training' },
      errors: ['spec.connectable_to: must be a list of entries'],
    },
    {
      rule: 'an entry that is not an object',
      connectable_to: ['training', null, [{ category: 'x' }]],
      errors: [
        'spec.connectable_to[0]: must be an object with one or more of category, distroID, version',
        'spec.connectable_to[1]: must be an object with one or more of category, distroID, version',
        'spec.connectable_to[2]: must be an object with one or more of category, distroID, version',
      ],
    },
    {
      rule: 'an empty entry (only unknown fields counts as empty)',
      connectable_to: [{ category: 'training' }, {}, { label: { name: 'x' } }],
      errors: [
        'spec.connectable_to[1]: empty entry matches no cluster; give at least one of category, distroID, version',
        'spec.connectable_to[2]: empty entry matches no cluster; give at least one of category, distroID, version',
      ],
    },
    {
      rule: 'fields that are not non-empty strings',
      connectable_to: [{ category: 5 }, { distroID: '' }, { version: '  ' }, { category: 'a', distroID: null }],
      errors: [
        'spec.connectable_to[0].category: must be a non-empty string, not 5',
        'spec.connectable_to[1].distroID: must be a non-empty string, not ""',
        'spec.connectable_to[2].version: must be a non-empty string, not "  "',
        'spec.connectable_to[3].distroID: must be a non-empty string, not null',
      ],
    },
    {
      rule: 'bad versions and ranges',
      connectable_to: [
        { version: '>=banana' },
        { category: 'streaming', version: 'latest' },
        { version: '2.4.5.beta!' },
      ],
      errors: [
        `spec.connectable_to[0].version: ">=banana" ${NEITHER}`,
        `spec.connectable_to[1].version: "latest" ${NEITHER}`,
        `spec.connectable_to[2].version: "2.4.5.beta!" ${NEITHER}`,
      ],
    },
    {
      rule: 'empty category of the app itself',
      connectable_to: undefined,
      extra: { category: '' },
      errors: ['spec.category: must be a non-empty string, not ""'],
    },
    {
      rule: 'several problems at once',
      connectable_to: [{}, { version: '>=banana' }],
      extra: { category: 7 as unknown as string },
      errors: [
        'spec.connectable_to[0]: empty entry matches no cluster; give at least one of category, distroID, version',
        `spec.connectable_to[1].version: ">=banana" ${NEITHER}`,
        'spec.category: must be a non-empty string, not 7',
      ],
    },
  ];

  it.each(cases.map((c) => [c.rule, c] as const))('%s', async (_rule, c) => {
    const object = withRules(c.connectable_to, c.extra);
    if (c.connectable_to === undefined) delete object.spec.connectable_to;
    const result = await validateApp({ operation: 'CREATE', object }, new MemoryWorld(), OPTS);
    expect(result.errors.map(formatFieldError)).toEqual(c.errors);
    expect(result.warnings).toEqual([]);
  });

  it('checkConnectableTo accepts absent and null', () => {
    expect(checkConnectableTo(undefined)).toEqual([]);
    expect(checkConnectableTo(null)).toEqual([]);
  });

  it('refuses an object without spec', async () => {
    const result = await validateApp(
      { operation: 'CREATE', object: { metadata: { name: 'x' } } as unknown as KDApp },
      new MemoryWorld(),
      OPTS,
    );
    expect(result.errors.map(formatFieldError)).toEqual(['spec: required']);
  });
});

describe('validateApp: tightening connectable_to warns with the connections it now forbids', () => {
  const OLD_RULES = [{ category: 'training' }, { category: 'streaming', version: '>=2.4 <3' }];
  const SPARK = 'app "spark-streaming" (category "streaming", distroID "bluedata/spark", version "2.4.7")';
  const TRAINING = 'app "training-engine" (category "training", distroID "hpecp/training-engine", version "1.2")';
  const TAIL =
    "They stay in the clusters' specs but are left out of configmeta (status NotConnectable) until allowed again";

  function world(appNs = NS): MemoryWorld {
    return new MemoryWorld({
      apps: [
        app(
          'jupyter-notebook',
          { category: 'notebook', distroID: 'hpecp/jupyter-notebook', version: '1.3', connectable_to: OLD_RULES },
          appNs,
        ),
        app('training-engine', { category: 'training', distroID: 'hpecp/training-engine', version: '1.2' }),
        app('spark-streaming', { category: 'streaming', distroID: 'bluedata/spark', version: '2.4.7' }),
        app('training-engine', { category: 'training', distroID: 'hpecp/training-engine', version: '1.2' }, 'team-b'),
        app('spark-streaming', { category: 'streaming', distroID: 'bluedata/spark', version: '2.4.7' }, 'team-b'),
      ],
      clusters: [
        cluster('training', 'training-engine'),
        cluster('spark-nightly', 'spark-streaming'),
        cluster('nb', 'jupyter-notebook', { connections: { clusters: ['training', 'spark-nightly', 'ghost'] } }),
        cluster('nb2', 'jupyter-notebook', { connections: { clusters: ['spark-nightly'] } }),
        // Uses another app of the same name? No: "other-app" is a different app entirely.
        cluster('lab', 'other-app', { connections: { clusters: ['spark-nightly'] } }),
        // Same names in another namespace.
        cluster('training', 'training-engine', { namespace: 'team-b' }),
        cluster('spark-nightly', 'spark-streaming', { namespace: 'team-b' }),
        cluster('nb', 'jupyter-notebook', { namespace: 'team-b', connections: { clusters: ['spark-nightly'] } }),
      ],
    });
  }

  const review = (newRules: ConnectableToEntry[], appNs = NS): AppReview => {
    const oldObject = app(
      'jupyter-notebook',
      { category: 'notebook', distroID: 'hpecp/jupyter-notebook', version: '1.3', connectable_to: OLD_RULES },
      appNs,
    );
    return {
      operation: 'UPDATE',
      oldObject,
      object: { ...oldObject, spec: { ...oldObject.spec, connectable_to: newRules } },
    };
  };

  it('names each now-forbidden connection of clusters using this (local) app, in its namespace only', async () => {
    const result = await validateApp(review([{ category: 'training' }]), world(), OPTS);
    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([
      `connectable_to of app "jupyter-notebook" now forbids 2 existing connection(s): ml/nb → cluster "spark-nightly" (${SPARK}); ml/nb2 → cluster "spark-nightly" (${SPARK}). ${TAIL}`,
    ]);
  });

  it('an empty list forbids every existing cluster connection', async () => {
    const result = await validateApp(review([]), world(), OPTS);
    expect(result.warnings).toEqual([
      `connectable_to of app "jupyter-notebook" now forbids 3 existing connection(s): ml/nb → cluster "spark-nightly" (${SPARK}); ml/nb → cluster "training" (${TRAINING}); ml/nb2 → cluster "spark-nightly" (${SPARK}). ${TAIL}`,
    ]);
  });

  it('a system-catalog app is checked against the clusters of every namespace that use it, which are counted, not named', async () => {
    const w = world(SYSTEM_NS);
    const result = await validateApp(review([{ category: 'training' }], SYSTEM_NS), w, OPTS);
    // Whoever edits the app may not see kdclusters in ml or team-b: no namespace or cluster name leaks.
    expect(result.warnings).toEqual([
      `connectable_to of app "jupyter-notebook" now forbids 3 existing connection(s): 3 in other namespaces (not named: this answer goes to whoever changes the app, who may not see those clusters; an administrator lists them with kubectl get kdclusters -A). ${TAIL}`,
    ]);
    for (const leak of ['ml/', 'team-b', 'nb2', 'spark-nightly']) expect(result.warnings[0]).not.toContain(leak);
  });

  it('next to KubeDirector the warning says KubeDirector keeps delivering them', async () => {
    const result = await validateApp(review([{ category: 'training' }]), world(), { ...OPTS, kubedirector: true });
    expect(result.warnings[0]).toMatch(/KubeDirector keeps delivering them; remove them from those specs$/);
  });

  it('a system-catalog app shadowed by a local app of the same name is not what that namespace uses', async () => {
    const w = world(SYSTEM_NS);
    // team-b has its own jupyter-notebook: its clusters resolve to that one (local first), not the system app.
    w.addApp(app('jupyter-notebook', { category: 'notebook' }, 'team-b'));
    const result = await validateApp(review([{ category: 'training' }], SYSTEM_NS), w, OPTS);
    expect(result.warnings).toHaveLength(1);
    expect(result.warnings[0]).not.toContain('team-b/nb');
    expect(result.warnings[0]).toContain('now forbids 2 existing connection(s)');
  });

  it('loosening or keeping the rules warns about nothing', async () => {
    for (const rules of [
      OLD_RULES,
      [...OLD_RULES, { category: 'database' }],
      [{ category: 'streaming' }, { category: 'training' }],
    ]) {
      const result = await validateApp(review(rules), world(), OPTS);
      expect(result).toEqual({ errors: [], warnings: [] });
    }
  });

  it('removing connectable_to (no restriction) warns about nothing', async () => {
    const r = review([]);
    delete r.object.spec.connectable_to;
    expect(await validateApp(r, world(), OPTS)).toEqual({ errors: [], warnings: [] });
  });

  it('a re-created app warns about the existing connections its rules forbid', async () => {
    const w = world();
    w.apps.delete(`${NS}/jupyter-notebook`);
    const created = await validateApp(
      { operation: 'CREATE', object: review([{ category: 'training' }]).object },
      w,
      OPTS,
    );
    expect(created).toEqual({
      errors: [],
      warnings: [
        `connectable_to of app "jupyter-notebook" now forbids 2 existing connection(s): ml/nb → cluster "spark-nightly" (${SPARK}); ml/nb2 → cluster "spark-nightly" (${SPARK}). ${TAIL}`,
      ],
    });
    // Rules that allow every existing connection: nothing to say.
    expect(await validateApp({ operation: 'CREATE', object: review(OLD_RULES).object }, w, OPTS)).toEqual({
      errors: [],
      warnings: [],
    });
  });

  it('an invalid update is not checked for tightening', async () => {
    const invalid = await validateApp(review([{}]), world(), OPTS);
    expect(invalid.errors).toHaveLength(1);
    expect(invalid.warnings).toEqual([]);
  });
});
