// `helm test` (templates/tests/connections.yaml): the webhooks, end to end through the API server.
// In TEST_NAMESPACE it creates two kdapps (one allowing connections to its own category, one allowing
// none) and a kdcluster of the first, then asks for two dry-run kdclusters connected to it: the one of the
// closed app must be refused with the product's connectable_to message, the one of the open app must be
// admitted with configMetaGenerator 1. Whatever happens, it deletes what it created. Plain node, no
// dependencies: the admission image has no shell and no client library outside its app.
'use strict';
const fs = require('node:fs');
const https = require('node:https');

const env = process.env;
const ns = env.TEST_NAMESPACE;
const prefix = env.TEST_PREFIX;
const sa = '/var/run/secrets/kubernetes.io/serviceaccount';
const token = fs.readFileSync(env.TEST_TOKEN_FILE || `${sa}/token`, 'utf8').trim();
const ca = fs.readFileSync(env.TEST_CA_FILE || `${sa}/ca.crt`);
const host = env.KUBERNETES_SERVICE_HOST;
const port = Number(env.KUBERNETES_SERVICE_PORT || 443);
const base = `/apis/kubedirector.hpe.com/v1beta1/namespaces/${ns}`;

function call(method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const headers = { Authorization: `Bearer ${token}`, Accept: 'application/json' };
    if (data) Object.assign(headers, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) });
    const req = https.request({ host, port, path, method, ca, headers, timeout: 20000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        let json;
        try {
          json = JSON.parse(text);
        } catch {
          json = { message: text };
        }
        resolve({ status: res.statusCode, json });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 20 s`)));
    req.on('error', reject);
    req.end(data);
  });
}

const app = (name, connectableTo) => ({
  apiVersion: 'kubedirector.hpe.com/v1beta1',
  kind: 'KubeDirectorApp',
  metadata: { name },
  spec: {
    label: { name: `${name} (helm test)` },
    distroID: `kd-connections/${name}`,
    version: '1.0',
    configSchemaVersion: 8,
    category: 'kd-connections-helm-test',
    connectable_to: connectableTo,
    roles: [{ id: 'main', cardinality: '1' }],
    services: [{ id: 'ui', label: { name: 'UI' }, endpoint: { port: 8080, urlScheme: 'http' } }],
    config: { selectedRoles: ['main'], roleServices: [{ roleID: 'main', serviceIDs: ['ui'] }] },
  },
});
const cluster = (name, appName, clusters) => ({
  apiVersion: 'kubedirector.hpe.com/v1beta1',
  kind: 'KubeDirectorCluster',
  metadata: { name },
  spec: { app: appName, roles: [{ id: 'main', members: 1 }], ...(clusters ? { connections: { clusters } } : {}) },
});

const OPEN = `${prefix}-open`;
const CLOSED = `${prefix}-closed`;
const TARGET = `${prefix}-target`;
const created = [
  ['kubedirectorclusters', TARGET],
  ['kubedirectorapps', OPEN],
  ['kubedirectorapps', CLOSED],
];

async function removeAll() {
  for (const [kind, name] of created) {
    const r = await call('DELETE', `${base}/${kind}/${name}`);
    if (![200, 202, 404].includes(r.status))
      throw new Error(`delete ${kind}/${name} in ${ns}: ${r.status} ${r.json.message}`);
  }
}

async function create(kind, obj) {
  const r = await call('POST', `${base}/${kind}`, obj);
  if (r.status !== 201) throw new Error(`create ${kind}/${obj.metadata.name} in ${ns}: ${r.status} ${r.json.message}`);
}

const dryRun = (obj) => call('POST', `${base}/kubedirectorclusters?dryRun=All`, obj);

async function checks() {
  await create('kubedirectorapps', app(OPEN, [{ category: 'kd-connections-helm-test' }]));
  await create('kubedirectorapps', app(CLOSED, []));
  await create('kubedirectorclusters', cluster(TARGET, OPEN));

  const denied = await dryRun(cluster(`${prefix}-denied`, CLOSED, [TARGET]));
  const message = String(denied.json.message || '').replace(/\s*\n\s*/g, ' ');
  console.log(`dry-run kdcluster of app ${CLOSED} connected to ${TARGET}: ${denied.status} ${message}`);
  const expected = `app "${CLOSED}" allows no cluster connections`;
  if (denied.status !== 403 || !message.includes(expected) || !message.includes('spec.connections.clusters[0]'))
    throw new Error(
      `expected a refusal (403) naming spec.connections.clusters[0] and saying ${JSON.stringify(expected)}: ` +
        `is namespace ${ns} served by the webhooks? (set tests.namespace)`,
    );

  const allowed = await dryRun(cluster(`${prefix}-allowed`, OPEN, [TARGET]));
  const generator = allowed.json.spec && allowed.json.spec.configMetaGenerator;
  console.log(
    `dry-run kdcluster of app ${OPEN} connected to ${TARGET}: ${allowed.status}, configMetaGenerator ${generator}`,
  );
  if (allowed.status !== 201 || generator !== 1)
    throw new Error(
      `expected it admitted (201) with configMetaGenerator 1 from the mutating webhook: ${allowed.json.message || ''}`,
    );
}

async function main() {
  await removeAll(); // what a test run cut short left behind
  let failure;
  try {
    await checks();
  } catch (e) {
    failure = e;
  }
  try {
    await removeAll();
  } catch (e) {
    // Both are said: the check's failure is the one that matters, the cleanup's tells what is left.
    throw failure ? new Error(`${failure.message}; and then: ${e.message}`) : e;
  }
  if (failure) throw failure;
  console.log(`passed; removed what it created in ${ns}`);
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e.message);
    process.exit(1);
  },
);
