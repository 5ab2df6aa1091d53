/**
 * The chart conventions users expect from the cert-manager, Kyverno and Gatekeeper charts: an overridable
 * pod spec, commonLabels, global.* keys, and the optional PrometheusRule and Grafana dashboard. Each value
 * is rendered and must change what it names (a value that renders nothing fails here); bad combinations
 * are refused by the schema and, with --skip-schema-validation, by the chart with a sentence; the metric
 * names the rule and the dashboard use are checked against what the running services expose.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { useTestEnv } from '../support/cluster.js';
import { installCrds } from '../support/crds.js';
import { startAdmission, startReconciler, type ReconcilerProcess, type RunningAdmission } from '../support/services.js';
import { ok, run } from '../support/processes.js';
import { registerWebhooks, waitUntilLive, type Registration } from '../support/webhook-configurations.js';
import { CHART, find, helmTemplate, one, sets, type Doc } from './chart-support.js';

const env = useTestEnv();
const NS = 'kd-system';
const REL = 'kd';
const FULL = `${REL}-kd-connections`;
const COMPONENTS = ['admission', 'reconciler'] as const;

const render = (args: string[] = [], namespace = NS) => helmTemplate(env, REL, namespace, args);
const deployment = (docs: Doc[], component: string) => one(docs, 'Deployment', `${FULL}-${component}`);
const podSpec = (docs: Doc[], component: string) => deployment(docs, component).spec.template.spec;
const container = (docs: Doc[], component: string) => podSpec(docs, component).containers[0];

describe('defaults', () => {
  it('both pods: linux nodes, 5 old ReplicaSets, the restricted security contexts, the pod network', async () => {
    const { docs } = await render();
    for (const c of COMPONENTS) {
      expect(deployment(docs, c).spec.revisionHistoryLimit).toBe(5);
      const pod = podSpec(docs, c);
      expect(pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
      expect(pod.hostNetwork).toBeUndefined();
      expect(pod.dnsPolicy).toBeUndefined();
      expect(pod.imagePullSecrets).toBeUndefined();
      expect(pod.priorityClassName).toBeUndefined();
      expect(pod.securityContext).toEqual({
        runAsNonRoot: true,
        runAsUser: 65532,
        runAsGroup: 65532,
        fsGroup: 65532,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(container(docs, c).securityContext).toMatchObject({ runAsUser: 65532, readOnlyRootFilesystem: true });
    }
    expect(find(docs, 'PrometheusRule')).toEqual([]);
    expect(find(docs, 'ConfigMap').filter((d) => d.metadata.name.endsWith('-dashboard'))).toEqual([]);
  });
});

describe('every pod-spec value changes what it names, in both Deployments', () => {
  // [value, --set args for component c, what must hold in the rendered Deployment]
  const cases: [string, (c: string) => string[], (dep: Doc, c: string) => void][] = [
    [
      'revisionHistoryLimit',
      (c) => sets({ [`${c}.revisionHistoryLimit`]: 2 }),
      (dep) => expect(dep.spec.revisionHistoryLimit).toBe(2),
    ],
    [
      'hostNetwork (with cluster DNS kept; no declared ports, which would be hostPorts a surge pod cannot get)',
      (c) => sets({ [`${c}.hostNetwork`]: true }),
      (dep) => {
        const pod = dep.spec.template.spec;
        expect(pod).toMatchObject({ hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' });
        const ctr = pod.containers[0];
        expect(ctr.ports).toBeUndefined();
        const port = dep.metadata.name.endsWith('-admission') ? 9443 : 8080;
        for (const probe of [ctr.readinessProbe, ctr.livenessProbe, ctr.startupProbe].filter(Boolean))
          expect(probe.httpGet.port).toBe(port);
      },
    ],
    [
      'bindAddress',
      (c) => sets({ [`${c}.bindAddress`]: '127.0.0.1' }),
      (dep) =>
        expect(dep.spec.template.spec.containers[0].args).toContain(
          dep.metadata.name.endsWith('-admission')
            ? '--bind-address=127.0.0.1'
            : '--metrics-bind-address=127.0.0.1:8080',
        ),
    ],
    [
      'podSecurityContext: the fixed ids unset (OpenShift assigns its own)',
      (c) =>
        sets({
          [`${c}.podSecurityContext.runAsUser`]: 'null',
          [`${c}.podSecurityContext.runAsGroup`]: 'null',
          [`${c}.podSecurityContext.fsGroup`]: 'null',
        }),
      (dep) =>
        expect(dep.spec.template.spec.securityContext).toEqual({
          runAsNonRoot: true,
          seccompProfile: { type: 'RuntimeDefault' },
        }),
    ],
    [
      'securityContext: the container ids unset, other fields kept',
      (c) => sets({ [`${c}.securityContext.runAsUser`]: 'null', [`${c}.securityContext.runAsGroup`]: 'null' }),
      (dep) => {
        const sc = dep.spec.template.spec.containers[0].securityContext;
        expect(sc).not.toHaveProperty('runAsUser');
        expect(sc).not.toHaveProperty('runAsGroup');
        expect(sc).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
      },
    ],
    [
      "readinessProbe and livenessProbe timings (the handler stays the chart's)",
      (c) =>
        sets({
          [`${c}.readinessProbe.periodSeconds`]: 17,
          [`${c}.readinessProbe.successThreshold`]: 2,
          [`${c}.livenessProbe.initialDelaySeconds`]: 33,
        }),
      (dep) => {
        const ctr = dep.spec.template.spec.containers[0];
        expect(ctr.readinessProbe).toMatchObject({
          periodSeconds: 17,
          successThreshold: 2,
          httpGet: { path: '/readyz' },
        });
        expect(ctr.livenessProbe).toMatchObject({ initialDelaySeconds: 33, httpGet: { path: '/healthz' } });
      },
    ],
    [
      'extraVolumes and extraVolumeMounts',
      (c) => [
        ...sets({ [`${c}.extraVolumes[0].name`]: 'corp-ca', [`${c}.extraVolumes[0].configMap.name`]: 'corp-ca' }),
        ...sets({
          [`${c}.extraVolumeMounts[0].name`]: 'corp-ca',
          [`${c}.extraVolumeMounts[0].mountPath`]: '/etc/corp',
        }),
      ],
      (dep) => {
        expect(dep.spec.template.spec.volumes).toContainEqual({ name: 'corp-ca', configMap: { name: 'corp-ca' } });
        expect(dep.spec.template.spec.volumes[0].name).toBe('tmp');
        expect(dep.spec.template.spec.containers[0].volumeMounts).toContainEqual({
          name: 'corp-ca',
          mountPath: '/etc/corp',
        });
      },
    ],
    [
      'nodeSelector replaced',
      (c) => ['--set', `${c}.nodeSelector.kubernetes\\.io/os=null`, ...sets({ [`${c}.nodeSelector.pool`]: 'infra' })],
      (dep) => expect(dep.spec.template.spec.nodeSelector).toEqual({ pool: 'infra' }),
    ],
    [
      'strategy (no surge, one down: hostNetwork on a cluster without a spare node)',
      (c) => sets({ [`${c}.strategy.rollingUpdate.maxSurge`]: 0, [`${c}.strategy.rollingUpdate.maxUnavailable`]: 1 }),
      (dep) =>
        expect(dep.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } }),
    ],
    [
      'priorityClassName',
      (c) => sets({ [`${c}.priorityClassName`]: `${c}-pc` }),
      (dep, c) => expect(dep.spec.template.spec.priorityClassName).toBe(`${c}-pc`),
    ],
  ];
  const rows = cases.flatMap(([what, args, check]) => COMPONENTS.map((c) => ({ what, c, args: args(c), check })));
  it.each(rows)('$c: $what', async ({ c, args, check }) => {
    const [base, changed] = [await render(), await render(args)];
    check(deployment(changed.docs, c), c);
    // Only the Deployment named changed (and nothing else in the release).
    const other = c === 'admission' ? 'reconciler' : 'admission';
    expect(deployment(changed.docs, other)).toEqual(deployment(base.docs, other));
    expect(changed.docs.length).toBe(base.docs.length);
  });

  it('admission startupProbe timings', async () => {
    const { docs } = await render(sets({ 'admission.startupProbe.failureThreshold': 120 }));
    expect(container(docs, 'admission').startupProbe).toMatchObject({ failureThreshold: 120, periodSeconds: 2 });
  });
});

describe('global.* and commonLabels', () => {
  it('global.imageRegistry wins over image.registry for both images', async () => {
    const { docs } = await render(sets({ 'image.registry': 'ghcr.io', 'global.imageRegistry': 'mirror.corp:5000' }));
    for (const c of COMPONENTS) expect(container(docs, c).image).toMatch(new RegExp(`^mirror\\.corp:5000/.*${c}[:@]`));
  });

  it('global.imagePullSecrets are added to image.pullSecrets, each name once, in both pods', async () => {
    const { docs } = await render(
      sets({
        'image.pullSecrets[0].name': 'chart-secret',
        'global.imagePullSecrets[0].name': 'parent-secret',
        'global.imagePullSecrets[1].name': 'chart-secret',
      }),
    );
    for (const c of COMPONENTS)
      expect(podSpec(docs, c).imagePullSecrets).toEqual([{ name: 'chart-secret' }, { name: 'parent-secret' }]);
  });

  it('global.priorityClassName applies to both pods unless a component sets its own', async () => {
    const { docs } = await render(sets({ 'global.priorityClassName': 'kd-critical' }));
    for (const c of COMPONENTS) expect(podSpec(docs, c).priorityClassName).toBe('kd-critical');
    const own = await render(sets({ 'global.priorityClassName': 'kd-critical', 'reconciler.priorityClassName': 'r' }));
    expect(podSpec(own.docs, 'reconciler').priorityClassName).toBe('r');
    expect(podSpec(own.docs, 'admission').priorityClassName).toBe('kd-critical');
  });

  it('a system-*-critical priority class outside kube-system brings the ResourceQuota that admits it', async () => {
    expect(find((await render(sets({ 'global.priorityClassName': 'high' }))).docs, 'ResourceQuota')).toEqual([]);
    const { docs } = await render(sets({ 'admission.priorityClassName': 'system-cluster-critical' }));
    expect(one(docs, 'ResourceQuota', `${FULL}-critical-pods`).spec).toEqual({
      hard: { pods: '3' },
      scopeSelector: {
        matchExpressions: [{ operator: 'In', scopeName: 'PriorityClass', values: ['system-cluster-critical'] }],
      },
    });
    const both = await render(sets({ 'global.priorityClassName': 'system-node-critical' }));
    expect(one(both.docs, 'ResourceQuota').spec.hard.pods).toBe('6');
    const off = await render(
      sets({ 'global.priorityClassName': 'system-node-critical', 'criticalPodsQuota.enabled': false }),
    );
    expect(find(off.docs, 'ResourceQuota')).toEqual([]);
    const kubeSystem = await render(sets({ 'global.priorityClassName': 'system-node-critical' }), 'kube-system');
    expect(find(kubeSystem.docs, 'ResourceQuota')).toEqual([]);
  });

  it('extraObjects: objects and YAML strings, through tpl', async () => {
    const { docs } = await render([
      '--set-json',
      'extraObjects=[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a-{{ .Release.Name }}"}},' +
        '"apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: b-{{ .Release.Namespace }}"]',
    ]);
    expect(one(docs, 'ConfigMap', `a-${REL}`).kind).toBe('ConfigMap');
    expect(one(docs, 'ConfigMap', `b-${NS}`).kind).toBe('ConfigMap');
  });

  it('a parent chart may pass global keys of its own', async () => {
    const { docs } = await render(sets({ 'global.storageClass': 'fast' }));
    expect(docs.length).toBeGreaterThan(10);
  });

  it('commonLabels land on every object and every pod template, never on a selector', async () => {
    const { docs } = await render([
      ...sets({ 'commonLabels.team': 'data', 'prometheusRule.enabled': true, 'grafanaDashboard.enabled': true }),
      ...sets({ 'serviceMonitor.enabled': true, 'networkPolicy.enabled': true }),
    ]);
    for (const d of docs)
      expect({ [`${d.kind}/${d.metadata.name}`]: d.metadata.labels.team }).toEqual({
        [`${d.kind}/${d.metadata.name}`]: 'data',
      });
    for (const c of COMPONENTS) {
      const dep = deployment(docs, c);
      expect(dep.spec.template.metadata.labels.team).toBe('data');
      expect(dep.spec.selector.matchLabels).not.toHaveProperty('team');
    }
  });
});

describe('bad combinations: refused by the schema, and by the chart with a sentence', () => {
  // [what, --set args, the schema's message (helm template and lint), the chart's sentence (helm template,
  // also with --skip-schema-validation; helm lint reports a template `fail` only as INFO)]
  const cases: [string, string[], RegExp | undefined, RegExp | undefined][] = [
    [
      'admission hostNetwork with a port below 1024',
      sets({ 'admission.hostNetwork': true, 'admission.port': 443 }),
      /at '\/admission\/port': minimum: got 443, want 1,?024/,
      /admission\.hostNetwork=true needs ports of 1024 or higher \(got 443\)/,
    ],
    [
      'admission hostNetwork with clientAuth on a probe port below 1024',
      [
        ...sets({ 'admission.hostNetwork': true, 'admission.clientAuth.enabled': true }),
        ...sets({ 'admission.clientAuth.probePort': 81 }),
        '--set-string',
        'admission.clientAuth.caBundle=-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
      ],
      /at '\/admission\/clientAuth\/probePort': minimum: got 81, want 1,?024/,
      /admission\.hostNetwork=true needs ports of 1024 or higher \(got 81\)/,
    ],
    [
      'reconciler hostNetwork with a metrics port below 1024',
      sets({ 'reconciler.hostNetwork': true, 'reconciler.metricsPort': 80 }),
      /at '\/reconciler\/metricsPort': minimum: got 80, want 1,?024/,
      /reconciler\.hostNetwork=true needs reconciler\.metricsPort of 1024 or higher \(got 80\)/,
    ],
    [
      'runAsUser 0 with runAsNonRoot',
      sets({ 'reconciler.securityContext.runAsUser': 0 }),
      /at '\/reconciler\/securityContext\/runAsNonRoot': value must be false/,
      /reconciler\.securityContext\.runAsUser=0 contradicts runAsNonRoot=true/,
    ],
    [
      'a mount of a volume the pod does not have',
      sets({ 'admission.extraVolumeMounts[0].name': 'nope', 'admission.extraVolumeMounts[0].mountPath': '/x' }),
      // The schema cannot relate two lists: the chart's sentence is the only message.
      undefined,
      /admission\.extraVolumeMounts: "nope" mounts a volume the pod does not have; add it to admission\.extraVolumes/,
    ],
    [
      "an extra volume named like one of the chart's",
      sets({ 'reconciler.extraVolumes[0].name': 'tmp', 'reconciler.extraVolumes[0].emptyDir.medium': 'Memory' }),
      undefined,
      /reconciler\.extraVolumes: a volume named "tmp" already exists in the pod/,
    ],
    [
      'both pods on the node network on the same port',
      sets({ 'admission.hostNetwork': true, 'reconciler.hostNetwork': true, 'reconciler.metricsPort': 9443 }),
      undefined,
      /admission and reconciler both use port 9443 on the node's network/,
    ],
    [
      "a commonLabel that would override the chart's own",
      ['--set', 'commonLabels.app\\.kubernetes\\.io/name=mine'],
      /at '\/commonLabels\/app\.kubernetes\.io~1name'/,
      /commonLabels\.app\.kubernetes\.io\/name: the chart sets app\.kubernetes\.io\/\* and helm\.sh\/chart itself/,
    ],
    [
      'Recreate with the default rollingUpdate left in',
      sets({ 'admission.strategy.type': 'Recreate' }),
      /at '\/admission\/strategy': 'not' failed/,
      /admission\.strategy\.type=Recreate has no rollingUpdate: also set admission\.strategy\.rollingUpdate=null/,
    ],
    [
      'a probe handler instead of timings',
      sets({ 'admission.livenessProbe.exec.command[0]': 'true' }),
      /at '\/admission\/livenessProbe': additional properties 'exec' not allowed/,
      undefined,
    ],
    [
      'a typo in a securityContext key',
      sets({ 'admission.securityContext.runAsuser': 1000 }),
      /at '\/admission\/securityContext': additional properties 'runAsuser' not allowed/,
      undefined,
    ],
  ];
  const rows = cases.map(([what, args, message, sentence]) => ({ what, args, message, sentence }));
  it.each(rows)('$what', async ({ args, message, sentence }) => {
    if (message)
      for (const command of [
        ['template', REL],
        ['lint', '--strict'],
      ]) {
        const r = await env.helm([...command, CHART, '--namespace', NS, ...args]);
        expect(r.code).not.toBe(0);
        expect(r.stdout + r.stderr).toMatch(message);
      }
    if (sentence)
      for (const skip of message ? [['--skip-schema-validation']] : [[], ['--skip-schema-validation']]) {
        const r = await env.helm(['template', REL, CHART, '--namespace', NS, ...skip, ...args]);
        expect(r.code).not.toBe(0);
        expect(r.stderr).toMatch(sentence);
      }
  });

  it('the corrected values render', async () => {
    for (const args of [
      sets({ 'admission.hostNetwork': true, 'admission.port': 10250, 'reconciler.hostNetwork': true }),
      sets({ 'reconciler.securityContext.runAsUser': 0, 'reconciler.securityContext.runAsNonRoot': false }),
    ])
      expect((await env.helm(['template', REL, CHART, '--namespace', NS, ...args])).code).toBe(0);
  });
});

it('overrides render objects the real API server accepts (server-side dry run, strict field validation)', async () => {
  const { docs } = await render(
    [
      ...sets({ 'admission.hostNetwork': true, 'admission.port': 10250, 'reconciler.hostNetwork': true }),
      ...sets({ 'admission.podSecurityContext.runAsUser': 'null', 'admission.securityContext.runAsUser': 'null' }),
      ...sets({ 'reconciler.extraVolumes[0].name': 'corp-ca', 'reconciler.extraVolumes[0].configMap.name': 'c' }),
      ...sets({ 'reconciler.extraVolumeMounts[0].name': 'corp-ca', 'reconciler.extraVolumeMounts[0].mountPath': '/c' }),
      ...sets({ 'global.imagePullSecrets[0].name': 'regcred', 'commonLabels.team': 'data' }),
      ...sets({ 'grafanaDashboard.enabled': true }),
      // The CRDs are the shared control plane's; their own dry run is in kubedirector-mode.test.ts.
      ...sets({ 'crds.install': false }),
    ],
    env.namespace,
  );
  const list = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: docs });
  const r = await env.kubectl(['apply', '--dry-run=server', '--validate=strict', '-f', '-'], {
    input: list,
    namespace: false,
  });
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
});

describe('PrometheusRule and Grafana dashboard', () => {
  let admission: RunningAdmission;
  let reconciler: ReconcilerProcess;

  beforeAll(async () => {
    await installCrds(env);
    [admission, reconciler] = await Promise.all([startAdmission(env), startReconciler(env)]);
  }, 120_000);

  afterAll(async () => {
    await admission?.stop();
    await reconciler?.stop();
  });

  /** Metric families a service exposes (# TYPE lines), with the series names histograms add. */
  const exposed = (text: string): Set<string> => {
    const names = new Set<string>();
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      names.add(name!);
      if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name! + s);
    }
    return names;
  };

  /** Metric names in a PromQL expression: identifiers outside strings, label matchers and by (...) lists. */
  const metricNames = (expr: string): string[] =>
    [
      ...expr
        .replace(/"(?:[^"\\]|\\.)*"/g, '""')
        .replace(/\{[^}]*\}/g, '')
        .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
        .replace(/\[[^\]]*\]/g, '')
        .matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()/g),
    ]
      .map((m) => m[1]!)
      .filter((n) => n.includes('_') && !n.startsWith('$'));

  it('both are off by default and render when enabled, with their labels', async () => {
    const { docs } = await render([
      ...sets({ 'prometheusRule.enabled': true, 'prometheusRule.labels.release': 'kube-prometheus-stack' }),
      ...sets({ 'grafanaDashboard.enabled': true, 'grafanaDashboard.namespace': 'monitoring' }),
      ...sets({ 'grafanaDashboard.annotations.grafana_folder': 'Kubernetes' }),
    ]);
    const rule = one(docs, 'PrometheusRule', FULL);
    expect(rule.metadata.labels.release).toBe('kube-prometheus-stack');
    const alerts = rule.spec.groups.flatMap((g: Doc) => g.rules.map((r: Doc) => r.alert));
    expect(new Set(alerts)).toEqual(
      new Set([
        'KdConnectionsWebhookCertificateExpiresSoon',
        'KdConnectionsWebhookErrors',
        'KdConnectionsWebhookSlow',
        'KdConnectionsWebhookWrongPath',
        'KdConnectionsWebhookNotReady',
        'KdConnectionsReconcileErrors',
        'KdConnectionsMemberPodsNotSynced',
        'KdConnectionsClustersNotReady',
        'KdConnectionsNoLeader',
      ]),
    );
    // Scoped to the release: its namespace, its Lease.
    for (const g of rule.spec.groups) for (const r of g.rules) expect(r.expr).toContain(`namespace="${NS}"`);
    expect(JSON.stringify(rule)).toContain(`name=\\"${FULL}-reconciler\\"`);

    const cm = one(docs, 'ConfigMap', `${FULL}-dashboard`);
    expect(cm.metadata).toMatchObject({
      namespace: 'monitoring',
      labels: { grafana_dashboard: '1' },
      annotations: { grafana_folder: 'Kubernetes' },
    });
    const dash = JSON.parse(cm.data['kd-connections.json']);
    expect(dash.uid).toBe('kd-connections');
    expect(dash.panels.filter((p: Doc) => p.type !== 'row').length).toBeGreaterThanOrEqual(10);
  });

  it('thresholds come from values', async () => {
    const { docs } = await render(
      sets({
        'prometheusRule.enabled': true,
        'prometheusRule.certificateExpiryDays': 30,
        'prometheusRule.for': '3m',
      }).concat(['--set-json', 'prometheusRule.webhookLatencySeconds=0.5']),
    );
    const rules = one(docs, 'PrometheusRule', FULL).spec.groups.flatMap((g: Doc) => g.rules as Doc[]);
    const byName = (a: string) => rules.filter((r: Doc) => r.alert === a);
    expect(byName('KdConnectionsWebhookCertificateExpiresSoon').map((r: Doc) => r.expr)).toEqual([
      expect.stringContaining(`< ${30 * 86400}`),
      expect.stringContaining(`< ${10 * 86400}`),
    ]);
    expect(byName('KdConnectionsWebhookSlow')[0].expr).toMatch(/> 0\.5\s*$/);
    expect(byName('KdConnectionsWebhookErrors')[0].for).toBe('3m');
  });

  it('every metric the rule and the dashboard query is one the running services expose', async () => {
    const names = new Set([
      ...exposed(await admission.metrics()),
      ...exposed(await (await fetch(`http://127.0.0.1:${reconciler.port}/metrics`)).text()),
    ]);
    const { docs } = await render(sets({ 'prometheusRule.enabled': true, 'grafanaDashboard.enabled': true }));
    const exprs = [
      ...one(docs, 'PrometheusRule', FULL).spec.groups.flatMap((g: Doc) => g.rules.map((r: Doc) => r.expr as string)),
      ...JSON.parse(one(docs, 'ConfigMap', `${FULL}-dashboard`).data['kd-connections.json']).panels.flatMap((p: Doc) =>
        (p.targets ?? []).map((t: Doc) => t.expr as string),
      ),
    ];
    const used = new Set(exprs.flatMap(metricNames));
    expect(used.size).toBeGreaterThanOrEqual(15);
    expect([...used].filter((n) => !names.has(n))).toEqual([]);
  });

  it('the services expose controller-runtime names, unprefixed process/nodejs metrics and the expiry timestamp', async () => {
    const adm = exposed(await admission.metrics());
    const rec = exposed(await (await fetch(`http://127.0.0.1:${reconciler.port}/metrics`)).text());
    for (const n of [
      'workqueue_depth',
      'workqueue_adds_total',
      'workqueue_queue_duration_seconds',
      'workqueue_work_duration_seconds',
      'workqueue_retries_total',
      'workqueue_unfinished_work_seconds',
      'workqueue_longest_running_processor_seconds',
      'controller_runtime_reconcile_total',
      'controller_runtime_reconcile_errors_total',
      'controller_runtime_reconcile_time_seconds',
      'leader_election_master_status',
      'kd_reconciler_configmeta_delivery_latency_seconds',
      'process_resident_memory_bytes',
      'nodejs_heap_size_used_bytes',
    ])
      expect({ [n]: rec.has(n) }).toEqual({ [n]: true });
    for (const n of [
      'controller_runtime_webhook_requests_total',
      'controller_runtime_webhook_latency_seconds',
      'controller_runtime_webhook_requests_in_flight',
      'kd_admission_tls_certificate_expiration_timestamp_seconds',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_p99_seconds',
    ])
      expect({ [n]: adm.has(n) }).toEqual({ [n]: true });
    expect(
      [...adm].filter((n) => n.startsWith('kd_admission_process_') || n.startsWith('kd_admission_nodejs_')),
    ).toEqual([]);
  });
});

describe('Chart.yaml for Artifact Hub', () => {
  it('artifacthub.io/images lists exactly the images the default values render, for the platforms they are built for', async () => {
    const chart = parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { annotations: Record<string, string> };
    const listed = parse(chart.annotations['artifacthub.io/images']!) as {
      name: string;
      image: string;
      platforms: string[];
    }[];
    const { docs } = await render();
    const sidecar = container(docs, 'admission')
      .args.find((a: string) => a.startsWith('--guestconfig-image='))
      .slice('--guestconfig-image='.length);
    expect(listed).toEqual([
      { name: 'admission', image: container(docs, 'admission').image, platforms: ['linux/amd64', 'linux/arm64'] },
      { name: 'reconciler', image: container(docs, 'reconciler').image, platforms: ['linux/amd64', 'linux/arm64'] },
      { name: 'guestconfig', image: sidecar, platforms: ['linux/amd64', 'linux/arm64'] },
    ]);
    expect(chart.annotations['artifacthub.io/license']).toBe('Apache-2.0');
  });
});

describe('helm test: a Pod that asks the admission service for /readyz', () => {
  const TEST_POD = `${FULL}-admission-test`;
  const testPod = (docs: Doc[]) => one(docs, 'Pod', TEST_POD);
  const envOf = (pod: Doc): Record<string, string> =>
    Object.fromEntries(pod.spec.containers[0].env.map((e: Doc) => [e.name, e.value]));
  /** Runs the pod's own `node -e` program here, with the pod's environment. */
  const runTestPod = (pod: Doc) => {
    const [ctr] = pod.spec.containers;
    expect(ctr.command).toEqual(['/usr/local/bin/node', '-e']);
    return run(process.execPath, ['-e', ctr.args[0]], { env: envOf(pod), timeoutMs: 30_000 });
  };
  const renderTests = (args: string[]) => helmTemplate(env, REL, NS, args, { tests: true });
  let admission: RunningAdmission | undefined;

  beforeAll(async () => {
    await installCrds(env);
    admission = await startAdmission(env);
  }, 120_000);

  afterAll(async () => {
    await admission?.stop();
  });

  it('by default: a test hook on the admission image, the Service address, restricted, deleted once passed', async () => {
    const { docs } = await renderTests(sets({ 'admission.tolerations[0].operator': 'Exists' }));
    const pod = testPod(docs);
    expect(pod.metadata.annotations).toEqual({
      'helm.sh/hook': 'test',
      'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded',
    });
    expect(pod.spec.containers[0].image).toBe(container(docs, 'admission').image);
    expect(pod.spec).toMatchObject({
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      nodeSelector: { 'kubernetes.io/os': 'linux' },
      tolerations: [{ operator: 'Exists' }],
      securityContext: { runAsNonRoot: true },
    });
    expect(pod.spec.hostNetwork).toBeUndefined();
    expect(pod.spec.containers[0].securityContext).toMatchObject({ readOnlyRootFilesystem: true });
    expect(envOf(pod)).toEqual({ ADDRESS: `${FULL}-admission.${NS}.svc:443`, SCHEME: 'https' });
  });

  it('clientAuth: the plain probes port; url mode and tests.enabled=false: no test pod', async () => {
    const { docs } = await renderTests([
      ...sets({ 'admission.clientAuth.enabled': true }),
      '--set-string',
      `admission.clientAuth.caBundle=${env.info.webhookCaPem}`,
    ]);
    expect(envOf(testPod(docs))).toEqual({ ADDRESS: `${FULL}-admission.${NS}.svc:8081`, SCHEME: 'http' });
    for (const args of [sets({ 'webhook.url': 'https://127.0.0.1:9443' }), sets({ 'tests.enabled': false })])
      expect(find((await renderTests(args)).docs, 'Pod')).toEqual([]);
  });

  it('its program passes against a ready admission service (CA verified) and fails where none answers', async () => {
    const onNode = (address: string) => [
      ...sets({ 'tests.hostNetwork': true, 'tests.admissionAddress': address, 'certificates.mode': 'secret' }),
      ...sets({
        'certificates.secret.name': 'tls',
        'webhook.caBundle': Buffer.from(env.info.webhookCaPem).toString('base64'),
      }),
    ];
    const pod = testPod((await renderTests(onNode(`127.0.0.1:${admission!.port}`))).docs);
    expect(pod.spec).toMatchObject({ hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' });
    const passed = await runTestPod(pod);
    expect(passed).toEqual({
      code: 0,
      stdout: `GET https://127.0.0.1:${admission!.port}/readyz: 200 ok\n`,
      stderr: '',
    });

    const other = (await renderTests([...onNode('127.0.0.1:9'), ...sets({ 'webhook.caBundle': 'QUJD' })])).docs;
    const refused = await runTestPod(testPod(other));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('GET https://127.0.0.1:9/readyz: connect ECONNREFUSED');
  }, 60_000);

  it('tests.admissionAddress must be host:port', async () => {
    const r = await env.helm([
      'template',
      REL,
      CHART,
      '--namespace',
      NS,
      ...sets({ 'tests.admissionAddress': 'nope' }),
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("at '/tests/admissionAddress': 'nope' does not match pattern");
  });
});

describe('helm test: a Pod that checks the webhooks through the API server', () => {
  const NAME = `${FULL}-test-connections`;
  const renderTests = (args: string[], namespace = NS) => helmTemplate(env, REL, namespace, args, { tests: true });
  const testDocs = (docs: Doc[]) => docs.filter((d) => d.metadata?.name === NAME);
  const envOf = (pod: Doc): Record<string, string> =>
    Object.fromEntries(pod.spec.containers[0].env.map((e: Doc) => [e.name, e.value]));

  it('a ServiceAccount, a Role to create kdapps and kdclusters and delete its own three in the tested namespace only, a Pod after the /readyz one', async () => {
    const { docs } = await renderTests(sets({ 'watchNamespaces[0]': 'kube-system', 'watchNamespaces[1]': 'apps' }));
    const mine = testDocs(docs);
    expect(mine.map((d) => `${d.kind} ${d.metadata.namespace}`)).toEqual([
      `ServiceAccount ${NS}`,
      'Role apps',
      'RoleBinding apps',
      `Pod ${NS}`,
    ]);
    // The grant goes whatever the outcome; a failed Pod stays for its log.
    for (const d of mine) {
      expect([d.kind, d.metadata.annotations]).toEqual([
        d.kind,
        expect.objectContaining({
          'helm.sh/hook': 'test',
          'helm.sh/hook-delete-policy':
            d.kind === 'Pod'
              ? 'before-hook-creation,hook-succeeded'
              : 'before-hook-creation,hook-succeeded,hook-failed',
        }),
      ]);
    }
    const G = ['kubedirector.hpe.com'];
    expect(one(mine, 'Role', NAME).rules).toEqual([
      { apiGroups: G, resources: ['kubedirectorapps', 'kubedirectorclusters'], verbs: ['create'] },
      {
        apiGroups: G,
        resources: ['kubedirectorapps'],
        resourceNames: [`${NAME}-open`, `${NAME}-closed`],
        verbs: ['delete'],
      },
      { apiGroups: G, resources: ['kubedirectorclusters'], resourceNames: [`${NAME}-target`], verbs: ['delete'] },
    ]);
    expect(one(mine, 'RoleBinding', NAME).subjects).toEqual([{ kind: 'ServiceAccount', name: NAME, namespace: NS }]);
    const pod = one(mine, 'Pod', NAME);
    // After the /readyz pod (weight 0), with the RBAC in place before (weight -10).
    expect(pod.metadata.annotations['helm.sh/hook-weight']).toBe('5');
    expect(pod.spec.serviceAccountName).toBe(NAME);
    expect(pod.spec.securityContext).toMatchObject({ runAsNonRoot: true });
    expect(pod.spec.containers[0].securityContext).toMatchObject({ readOnlyRootFilesystem: true });
    expect(envOf(pod)).toMatchObject({ TEST_NAMESPACE: 'apps', TEST_PREFIX: NAME });
    // On a node of the images' architectures, like the services.
    expect(pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms).toEqual([
      { matchExpressions: [{ key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64'] }] },
    ]);
  });

  it('tests.namespace wins when served; default without watchNamespaces; none where the choice is not served, in kubedirector mode or with tests.connections=false', async () => {
    const pods = async (args: string[], namespace = NS) =>
      testDocs((await renderTests(args, namespace)).docs).filter((d) => d.kind === 'Pod');
    const ns = async (args: string[]) => envOf((await pods(args))[0]!).TEST_NAMESPACE;
    expect(await ns([])).toBe('default');
    expect(await ns(sets({ 'tests.namespace': 'team-a' }))).toBe('team-a');
    expect(await ns(sets({ 'tests.namespace': 'apps', 'watchNamespaces[0]': 'apps' }))).toBe('apps');
    // Installed into `default` itself, which the webhooks never serve: no second test, the /readyz one stays.
    expect(await pods([], 'default')).toEqual([]);
    for (const args of [sets({ 'kubedirector.enabled': true }), sets({ 'tests.connections': false })])
      expect(testDocs((await renderTests(args)).docs)).toEqual([]);
  });

  it('an explicit tests.namespace the webhooks do not serve is refused, saying why', async () => {
    for (const args of [
      sets({ 'tests.namespace': 'team-a', 'watchNamespaces[0]': 'apps' }),
      sets({ 'tests.namespace': 'kube-system' }),
      sets({ 'tests.namespace': 'quiet', 'webhook.excludeNamespaces[0]': 'quiet' }),
    ]) {
      const r = await env.helm(['template', REL, CHART, '--namespace', NS, ...args]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(
        /tests\.namespace "[a-z-]+": the webhooks do not serve it .* set tests\.connections=false/,
      );
    }
  });

  describe('its program, run here with the rendered RBAC against the real API server and the running webhooks', () => {
    let admission: RunningAdmission | undefined;
    let hooks: Registration | undefined;
    let dir = '';
    const release = `${env.namespace}-rel`;

    beforeAll(async () => {
      await installCrds(env);
      admission = await startAdmission(env);
      hooks = await registerWebhooks(env, admission);
      await waitUntilLive(env);
      ok(await env.kubectl(['create', 'namespace', release], { namespace: false }), 'create the release namespace');
      const { docs } = await renderTests(sets({ 'tests.namespace': env.namespace }), release);
      const rbac = testDocs(docs).filter((d) => d.kind !== 'Pod');
      ok(
        await env.kubectl(['apply', '-f', '-'], {
          input: rbac.map((d) => `---\n${stringify(d)}`).join(''),
          namespace: false,
        }),
        'apply',
      );
      dir = mkdtempSync(join(tmpdir(), 'kd-helm-test-'));
      const token = ok(await env.kubectl(['create', 'token', NAME], { namespace: release }), 'token').stdout.trim();
      writeFileSync(join(dir, 'token'), token);
      writeFileSync(join(dir, 'ca.crt'), env.info.caPem);
    }, 120_000);

    afterAll(async () => {
      await hooks?.remove();
      await admission?.stop();
      await env.kubectl(['delete', 'namespace', release, '--wait=false'], { namespace: false });
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    /** The rendered Pod's program, for env.namespace; `elsewhere` runs it against another namespace. */
    const runProgram = async (elsewhere?: string) => {
      const { docs } = await renderTests(sets({ 'tests.namespace': env.namespace }), release);
      const pod = one(testDocs(docs), 'Pod', NAME);
      expect(pod.spec.containers[0].command).toEqual(['/usr/local/bin/node', '-e']);
      const server = new URL(env.info.server);
      return run(process.execPath, ['-e', pod.spec.containers[0].args[0]], {
        env: {
          ...envOf(pod),
          KUBERNETES_SERVICE_HOST: server.hostname,
          KUBERNETES_SERVICE_PORT: server.port,
          TEST_TOKEN_FILE: join(dir, 'token'),
          TEST_CA_FILE: join(dir, 'ca.crt'),
          ...(elsewhere ? { TEST_NAMESPACE: elsewhere } : {}),
        },
        timeoutMs: 60_000,
      });
    };

    it("passes: the closed app's connection refused with the product's message, the open one given generator 1; nothing left", async () => {
      const r = await runProgram();
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      const lines = r.stdout.trim().split('\n');
      expect(lines[0]).toMatch(
        new RegExp(
          `^dry-run kdcluster of app ${NAME}-closed connected to ${NAME}-target: 403 .*spec\\.connections\\.clusters\\[0\\].*allows no cluster connections`,
        ),
      );
      expect(lines[1]).toBe(
        `dry-run kdcluster of app ${NAME}-open connected to ${NAME}-target: 201, configMetaGenerator 1`,
      );
      expect(lines[2]).toBe(`passed; removed what it created in ${env.namespace}`);
      const left = ok(await env.kubectl(['get', 'kubedirectorapps,kubedirectorclusters', '-o', 'name']), 'list').stdout;
      expect(left).not.toContain(NAME);
    }, 90_000);

    it('its ServiceAccount may delete only its own three objects, and nothing elsewhere', async () => {
      const can = async (verb: string, what: string, namespace: string) =>
        (
          await env.kubectl(['auth', 'can-i', verb, what, `--as=system:serviceaccount:${release}:${NAME}`], {
            namespace,
          })
        ).stdout.trim();
      expect(await can('delete', `kubedirectorclusters/${NAME}-target`, env.namespace)).toBe('yes');
      expect(await can('delete', 'kubedirectorclusters/somebody-elses', env.namespace)).toBe('no');
      expect(await can('get', 'kubedirectorclusters', env.namespace)).toBe('no');
      expect(await can('create', 'kubedirectorclusters', release)).toBe('no');
    });

    it('fails, saying why, where its ServiceAccount has no rights (any other namespace)', async () => {
      const r = await runProgram(release);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        new RegExp(`^delete kubedirectorclusters/${NAME}-target in ${release}: 403 .* is forbidden`),
      );
    }, 90_000);
  });
});
