/** The plugin's command line: kubectl's own spellings (-n, -o, --kubeconfig, --context) where it has one. */
import { GRAPH_FORMATS } from '@kd-connections/shared/inspect';

export const USAGE = `Usage:
  kubectl kd-connections graph [-n NAMESPACE] [-o text|mermaid|dot]
  kubectl kd-connections explain CLUSTER [-n NAMESPACE]

  graph     the namespace's kdclusters, the ConfigMaps and Secrets they name or that are labelled
            connectable, and each connection: Connected, NotConnectable, Missing, Unlabeled (with why),
            or Unknown where your credentials cannot read what it depends on
  explain   why each connection of CLUSTER has its state, which configmeta generator each member pod
            holds and which lag, and the cluster's conditions

Options:
  -n, --namespace NS        default: the context's namespace, else "default"
  -o, --output FORMAT       graph only: text (default), mermaid, dot
      --kubeconfig FILE     default: $KUBECONFIG, else ~/.kube/config
      --context NAME        a context of the kubeconfig
      --system-namespace NS the system app catalog's namespace (default kd-system)
  -h, --help
`;

/** An object name as Kubernetes allows it for namespaces and kdclusters (RFC 1123 subdomain). */
const DNS_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export class UsageError extends Error {
  constructor(
    message: string,
    /** Print the usage after the message (a mistake in the command line, not in the cluster). */
    readonly usage = false,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface Args {
  help: boolean;
  command?: 'graph' | 'explain';
  cluster?: string;
  namespace?: string;
  output: string;
  kubeconfig?: string;
  context?: string;
  systemNamespace: string;
}

const VALUED: Record<string, keyof Args> = {
  '-n': 'namespace',
  '--namespace': 'namespace',
  '-o': 'output',
  '--output': 'output',
  '--kubeconfig': 'kubeconfig',
  '--context': 'context',
  '--system-namespace': 'systemNamespace',
};

export function parseArgs(argv: string[]): Args {
  const out: Args = { help: false, output: 'text', systemNamespace: 'kd-system' };
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '-h' || a === '--help') {
      out.help = true;
      continue;
    }
    // kubectl's forms: --flag value, --flag=value, -f value, -f=value, -fvalue.
    const short = /^(-[no])(=?)(.+)$/.exec(a);
    const eq = a.startsWith('--') ? a.indexOf('=') : -1;
    const flag = short ? short[1]! : eq > 0 ? a.slice(0, eq) : a;
    const key = VALUED[flag];
    if (key) {
      const value = short ? short[3] : eq > 0 ? a.slice(eq + 1) : argv[++i];
      if (value === undefined || value === '') throw new UsageError(`${flag} needs a value`, true);
      (out as unknown as Record<string, string>)[key] = value;
      continue;
    }
    if (a.startsWith('-')) throw new UsageError(`unknown option ${a}`, true);
    positional.push(a);
  }
  if (out.help) return out;
  const [command, ...rest] = positional;
  if (command !== 'graph' && command !== 'explain')
    throw new UsageError(command ? `unknown command "${command}"` : 'no command given', true);
  out.command = command;
  if (command === 'explain') {
    if (rest.length !== 1) throw new UsageError('explain takes one kdcluster name', true);
    out.cluster = rest[0];
  } else if (rest.length > 0) throw new UsageError(`graph takes no name (got "${rest[0]}")`, true);
  if (!(GRAPH_FORMATS as readonly string[]).includes(out.output))
    throw new UsageError(`-o ${out.output}: not one of ${GRAPH_FORMATS.join(', ')}`, true);
  if (command === 'explain' && out.output !== 'text') throw new UsageError('explain prints text only (no -o)', true);
  for (const [what, v] of [
    ['namespace', out.namespace],
    ['kdcluster name', out.cluster],
    ['system namespace', out.systemNamespace],
  ] as const)
    if (v !== undefined && !DNS_NAME.test(v))
      throw new UsageError(
        `${JSON.stringify(v)} is not a valid ${what} (lowercase letters, digits, '-' and '.')`,
        true,
      );
  return out;
}
