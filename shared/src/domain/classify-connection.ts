/**
 * The one judgement of a single connection, shared by the validating webhook and the reconciler, so the
 * two can never judge the same connection differently. `classify*` are pure functions of facts;
 * `observe*` read those facts through the Lookup port and classify them. The webhook adds its policy on
 * top (an added connection that is not Connected is refused, a kept one only warns); the reconciler
 * adds rendering and hashing of what is Connected.
 */
import { describeAllowed, describeApp, isConnectable } from './connectable.js';
import { appSearchDescription, resolveApp, type Lookup, type ResolvedApp, type RuleOptions } from './lookup.js';
import { SHOWN_NAME_MAX } from './names.js';
import { shortText } from '../primitives/short-json.js';
import {
  LABEL_CM_TYPE,
  LABEL_SECRET_TYPE,
  type ConnectionKind,
  type ConnectionState,
  type KDCluster,
  type MetaObject,
} from './types.js';

export interface Verdict {
  state: ConnectionState;
  /** Why the connection is not Connected; absent when it is. */
  message?: string;
  /** A Connected connection worth a word to whoever adds it (a cluster with no ready members yet). */
  note?: string;
}

/** What is known about a connection to a cluster. */
export interface ClusterFacts {
  name: string;
  namespace: string;
  /** The connection names the connecting cluster itself. */
  self: boolean;
  target: KDCluster | undefined;
  targetApp: ResolvedApp | undefined;
  /** The connecting cluster's own app (undefined when it was not found). */
  own: ResolvedApp | undefined;
  /** What the connecting cluster names as its app, to say which app is missing. */
  ownRef?: { app?: unknown; appCatalog?: unknown };
}

export function selfConnectionMessage(name: string): string {
  return `a cluster cannot connect to itself ("${name}")`;
}

function notFound(kind: ConnectionKind, name: string, namespace: string): string {
  return `${kind.toLowerCase()} "${name}" not found in namespace "${namespace}"`;
}

export function classifyCluster(f: ClusterFacts, opts: RuleOptions): Verdict {
  if (f.self) return { state: 'NotConnectable', message: selfConnectionMessage(f.name) };
  if (!f.target) return { state: 'Missing', message: notFound('Cluster', f.name, f.namespace) };
  const ownRules = f.own?.app.spec?.connectable_to;
  if (!f.targetApp) {
    const where = appSearchDescription(f.namespace, f.target.spec?.appCatalog, opts.systemNamespace);
    const unchecked =
      f.own && ownRules !== undefined && ownRules !== null
        ? `; it cannot be checked against connectable_to of app "${f.own.app.metadata.name}"`
        : '';
    return {
      state: 'NotConnectable',
      message: `cluster "${f.name}" uses app "${shortText(f.target.spec?.app, SHOWN_NAME_MAX)}", which was not found ${where}${unchecked}`,
    };
  }
  if (!f.own) {
    const which = f.ownRef
      ? `app "${shortText(f.ownRef.app, SHOWN_NAME_MAX)}" was not found ${appSearchDescription(f.namespace, f.ownRef.appCatalog, opts.systemNamespace)}`
      : 'own app was not found';
    return { state: 'NotConnectable', message: `this cluster's ${which}, so connectable_to cannot be checked` };
  }
  const verdict = isConnectable(f.own.app.spec, f.targetApp.app.spec);
  if (!verdict.allowed) {
    const ownName = `app "${f.own.app.metadata.name}"`;
    const why =
      verdict.reason === 'empty'
        ? `${ownName} allows no cluster connections (connectable_to is empty)`
        : `connectable_to of ${ownName} does not allow it; allowed: ${describeAllowed(f.own.app.spec)}`;
    return { state: 'NotConnectable', message: `cluster "${f.name}" uses ${describeApp(f.targetApp.app)}: ${why}` };
  }
  const ready = f.target.status?.members?.ready ?? 0;
  return ready > 0
    ? { state: 'Connected' }
    : {
        state: 'Connected',
        note: `cluster "${f.name}" has no ready members yet; its section of configmeta fills in as they come up`,
      };
}

const TYPE_LABEL = { ConfigMap: LABEL_CM_TYPE, Secret: LABEL_SECRET_TYPE } as const;

/** A ConfigMap or Secret: connectable when it exists and carries its type label. */
export function classifyObject(
  kind: 'ConfigMap' | 'Secret',
  obj: MetaObject | undefined,
  name: string,
  namespace: string,
  opts: RuleOptions,
): Verdict {
  if (kind === 'Secret' && opts.secretConnections === false) {
    return {
      state: 'NotConnectable',
      message: 'secret connections are disabled in this installation (chart value secretConnections.enabled)',
    };
  }
  if (!obj) return { state: 'Missing', message: notFound(kind, name, namespace) };
  const label = TYPE_LABEL[kind];
  if (obj.metadata.labels?.[label] === undefined) {
    return {
      state: 'Unlabeled',
      message: `${kind.toLowerCase()} "${name}" lacks label ${label}; add it (its value groups the ${kind} in configmeta) to make it connectable`,
    };
  }
  return { state: 'Connected' };
}

export interface ObservedCluster {
  verdict: Verdict;
  target?: KDCluster;
  targetApp?: ResolvedApp;
}

/** Reads what a connection to cluster `name` needs and classifies it (nothing is read for a self-connection). */
export async function observeCluster(
  lookup: Pick<Lookup, 'getApp' | 'getCluster'>,
  namespace: string,
  self: string,
  name: string,
  own: ResolvedApp | undefined,
  opts: RuleOptions,
  ownRef?: ClusterFacts['ownRef'],
): Promise<ObservedCluster> {
  const facts: ClusterFacts = {
    name,
    namespace,
    self: name === self,
    target: undefined,
    targetApp: undefined,
    own,
    ...(ownRef ? { ownRef } : {}),
  };
  if (!facts.self) {
    facts.target = await lookup.getCluster(namespace, name);
    if (facts.target)
      facts.targetApp = await resolveApp(lookup, namespace, facts.target.spec ?? {}, opts.systemNamespace);
  }
  return { verdict: classifyCluster(facts, opts), target: facts.target, targetApp: facts.targetApp };
}

/** Reads a connected ConfigMap or Secret and classifies it (a Secret is never read when they are disabled). */
export async function observeObject<CM extends MetaObject, S extends MetaObject>(
  lookup: Pick<Lookup<CM, S>, 'getConfigMap' | 'getSecret'>,
  kind: 'ConfigMap' | 'Secret',
  namespace: string,
  name: string,
  opts: RuleOptions,
): Promise<{ verdict: Verdict; object?: CM | S }> {
  const disabled = kind === 'Secret' && opts.secretConnections === false;
  const object = disabled
    ? undefined
    : kind === 'ConfigMap'
      ? await lookup.getConfigMap(namespace, name)
      : await lookup.getSecret(namespace, name);
  return { verdict: classifyObject(kind, object, name, namespace, opts), object };
}
