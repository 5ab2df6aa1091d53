#!/usr/bin/env node
/**
 * kubectl kd-connections — a kubectl plugin (kubectl finds `kubectl-kd_connections` on PATH):
 *   graph   [-n NS] [-o text|mermaid|dot]   the namespace's clusters, ConfigMaps, Secrets and connections
 *   explain CLUSTER [-n NS]                 why each connection has its state, which generator each member has
 * It reads with the user's own kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config; --context) and judges
 * connections with the webhook's classifier (shared/src/domain/classify-connection.ts).
 */
import { KubeConfig } from '@kubernetes/client-node';
import {
  connectionEdges,
  connectionGraph,
  explainCluster,
  renderGraph,
  type GraphFormat,
} from '@kd-connections/shared/inspect';
import { KubeClient, errorStatus } from '@kd-connections/shared/runtime';
import { parseArgs, UsageError, USAGE } from './args.js';
import { readCluster, readMemberPods, readNamespace } from './read-namespace.js';

async function main(argv: string[]): Promise<number> {
  const args = parseArgs(argv);
  if (args.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const kc = new KubeConfig();
  if (args.kubeconfig) kc.loadFromFile(args.kubeconfig);
  else kc.loadFromDefault();
  if (args.context) {
    if (!kc.getContexts().some((c) => c.name === args.context))
      throw new UsageError(`context "${args.context}" is not in the kubeconfig (kubectl config get-contexts)`);
    kc.setCurrentContext(args.context);
  }
  if (!kc.getCurrentCluster())
    throw new UsageError('the kubeconfig has no current cluster (kubectl config current-context)');
  const namespace = args.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
  const client = new KubeClient(kc, 'kubectl-kd-connections');
  const opts = { systemNamespace: args.systemNamespace };
  try {
    if (args.command === 'graph') {
      const snapshot = await readNamespace(client, namespace, args.systemNamespace);
      process.stdout.write(renderGraph(await connectionGraph(snapshot, opts), args.output as GraphFormat));
      return 0;
    }
    const cluster = await readCluster(client, namespace, args.cluster!).catch((e: unknown) => {
      if (errorStatus(e) === 403)
        throw new UsageError(`cannot read kdcluster ${namespace}/${args.cluster}: ${(e as Error).message}`);
      throw e;
    });
    if (!cluster) throw new UsageError(`kdcluster "${args.cluster}" not found in namespace "${namespace}"`);
    const snapshot = await readNamespace(client, namespace, args.systemNamespace);
    const { own, edges } = await connectionEdges(cluster, snapshot, opts);
    const pods = await readMemberPods(client, namespace, args.cluster!);
    process.stdout.write(
      explainCluster({
        cluster,
        own,
        systemNamespace: args.systemNamespace,
        edges,
        ...('pods' in pods ? { pods: pods.pods } : { podsUnreadable: pods.unreadable }),
      }),
    );
    return 0;
  } finally {
    client.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`kubectl kd-connections: ${e instanceof Error ? e.message : String(e)}\n`);
    if (e instanceof UsageError && e.usage) process.stderr.write(`\n${USAGE}`);
    process.exitCode = e instanceof UsageError && e.usage ? 2 : 1;
  },
);
