/**
 * The default mode's guard: before and while a service acts, it looks at what the API says about
 * kubedirector.hpe.com (discovery and the published kdcluster schema) and for KubeDirector's operator by
 * name (its Deployment and webhook configuration), and refuses to act while any of them is there. Each change of verdict is one log
 * line and one Warning event saying what to set; an unchanged verdict writes nothing.
 */
import { errorMessage, type Logger } from '../runtime/logger.js';
import {
  KDCLUSTER_OPENAPI_COMPONENT,
  KUBEDIRECTOR_OPERATOR_NAME,
  KUBEDIRECTOR_WEBHOOK_CONFIGURATION,
  operatorNamespaces,
  type OperatorWebhookConfiguration,
  kubeDirectorFindings,
  kubeDirectorGuardMessage,
  type ApiObservation,
} from './presence.js';
import type { EventRecorder, EventTarget } from '../runtime/event-recorder.js';
import { ACCEPT_META, errorStatus, type KubeClient } from '../runtime/kube-client.js';

export interface KubeDirectorGuardOptions {
  client: KubeClient;
  log: Logger;
  events: Pick<EventRecorder, 'record'>;
  /** What the event is about: the service's own Pod when it runs in one. */
  regarding: EventTarget;
  /** "kd-connections admission", for the message. */
  component: string;
  /** How often to look again; default 30 s. */
  intervalMs?: number;
  /** Called on every change of verdict. */
  onChange?: (refusal: string | undefined) => void;
}

const GROUP_PATH = '/apis/kubedirector.hpe.com/v1beta1';
const OPENAPI_PATH = '/openapi/v3/apis/kubedirector.hpe.com/v1beta1';

/**
 * The regarding object of the guard's events: this Pod from the downward API (the event then lands in the
 * release namespace, where the chart grants events create), else the kdcluster CRD (namespace default).
 */
export function guardEventTarget(env: NodeJS.ProcessEnv = process.env): EventTarget {
  // The chart gives admission POD_NAME and the reconciler KD_RECONCILER_LEADER_ELECT_IDENTITY, both the Pod's name.
  const pod = env.POD_NAME || env.KD_RECONCILER_LEADER_ELECT_IDENTITY;
  if (pod && env.POD_NAMESPACE) return { apiVersion: 'v1', kind: 'Pod', namespace: env.POD_NAMESPACE, name: pod };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    name: 'kubedirectorclusters.kubedirector.hpe.com',
  };
}

const OPERATOR_WEBHOOK_PATH = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${KUBEDIRECTOR_WEBHOOK_CONFIGURATION}`;
const operatorDeploymentPath = (namespace: string) =>
  `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/deployments/${KUBEDIRECTOR_OPERATOR_NAME}`;

/** A read the service may not be granted: forbidden means unknown, not absent (and not a failed look). */
async function unlessForbidden<T>(read: Promise<T>): Promise<T | undefined> {
  try {
    return await read;
  } catch (e) {
    if (errorStatus(e) === 403) return undefined;
    throw e;
  }
}

/**
 * Reads what the guard judges. The operator by name, with rights for those names only: its webhook
 * configuration, then its Deployment in the namespaces it is found in (operatorNamespaces), each a GET of
 * that one name (metadata only).
 */
export async function observeKubeDirectorApi(client: KubeClient): Promise<ApiObservation> {
  const timeoutMs = 10_000;
  const [group, webhook] = await Promise.all([
    client.getIfExists<{ resources?: { name?: string }[] }>(GROUP_PATH, { timeoutMs }),
    unlessForbidden(
      client.getIfExists<OperatorWebhookConfiguration>(OPERATOR_WEBHOOK_PATH, { timeoutMs }).then((o) => o ?? null),
    ),
  ]);
  const found = await Promise.all(
    operatorNamespaces(webhook ?? undefined).map(async (ns) => {
      const d = await unlessForbidden(
        client.getIfExists(operatorDeploymentPath(ns), { timeoutMs, accept: ACCEPT_META }).then((o) => o !== undefined),
      );
      return { ns, d };
    }),
  );
  const resources = group ? (group.resources ?? []).map((r) => String(r.name)) : undefined;
  const operator = {
    // Unknown only when no namespace could be read.
    operatorDeployments: found.every((f) => f.d === undefined)
      ? undefined
      : found.filter((f) => f.d).map((f) => `${f.ns}/${KUBEDIRECTOR_OPERATOR_NAME}`),
    operatorWebhook: webhook === undefined ? undefined : webhook !== null,
  };
  if (!resources?.includes('kubedirectorclusters')) return { resources, clusterSchema: undefined, ...operator };
  const doc = await client.getIfExists<{ components?: { schemas?: Record<string, unknown> } }>(OPENAPI_PATH, {
    timeoutMs,
  });
  return { resources, clusterSchema: doc?.components?.schemas?.[KDCLUSTER_OPENAPI_COMPONENT], ...operator };
}

export class KubeDirectorGuard {
  private current: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;

  constructor(private readonly o: KubeDirectorGuardOptions) {}

  /** Why the service must not act, or undefined when it may. */
  get refusal(): string | undefined {
    return this.current;
  }

  /** Looks once (awaited), then every interval. */
  async start(): Promise<void> {
    await this.check();
    this.timer = setInterval(() => void this.check(), this.o.intervalMs ?? 30_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One look; a failed look keeps the last verdict (and says so in the log). */
  check(): Promise<void> {
    this.checking ??= this.look().finally(() => (this.checking = undefined));
    return this.checking;
  }

  private async look(): Promise<void> {
    let findings: string[];
    try {
      findings = kubeDirectorFindings(await observeKubeDirectorApi(this.o.client));
    } catch (e) {
      this.o.log.warn('could not check for KubeDirector; keeping the last verdict', {
        error: errorMessage(e),
        refusing: this.current !== undefined,
      });
      return;
    }
    const next = findings.length > 0 ? kubeDirectorGuardMessage(this.o.component, findings) : undefined;
    if (next === this.current) return;
    this.current = next;
    if (next) {
      this.o.log.error(next, { reason: 'KubeDirectorFound', set: 'kubedirector.enabled=true' });
      this.o.events.record({
        regarding: this.o.regarding,
        type: 'Warning',
        reason: 'KubeDirectorFound',
        action: 'Refuse',
        note: next,
      });
    } else {
      this.o.log.info('KubeDirector no longer found; acting again', { reason: 'KubeDirectorGone' });
    }
    this.o.onChange?.(next);
  }
}
