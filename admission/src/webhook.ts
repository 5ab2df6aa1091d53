/**
 * A webhook is a path plus a pure decision over one AdmissionRequest; `runWebhook` puts the decision in
 * the envelope. Requests the webhook does not judge (other operations, subresources, other kinds) are
 * allowed unchanged: the configuration decides what is sent, and refusing what we do not understand
 * would turn a configuration slip into an outage.
 */
import type { AppLookup, RuleOptions } from '@kd-connections/shared';
import {
  toResponse,
  type AdmissionRequest,
  type AdmissionReview,
  type AdmissionReviewResponse,
  type Decision,
} from './admission-review.js';
import { memoizeLookup } from './memoize-lookup.js';

export interface WebhookDeps {
  lookup: AppLookup;
  rules: RuleOptions;
}

export type Operation = 'CREATE' | 'UPDATE';

export interface Webhook {
  /** Metric and log label, e.g. "validate-kdcluster". */
  name: string;
  /** URL path, e.g. "/validate-kdcluster". */
  path: string;
  /** The kind this webhook judges. */
  group: string;
  kind: string;
  operations: readonly Operation[];
  decide(request: JudgedRequest, deps: WebhookDeps): Promise<Decision> | Decision;
}

/** A request the webhook judges: a known operation and an object. */
export interface JudgedRequest extends AdmissionRequest {
  operation: Operation;
  object: Record<string, unknown>;
}

export interface WebhookResult {
  review: AdmissionReviewResponse;
  decision: Decision;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export function allow(note: string, warnings: string[] = []): Decision {
  return { allowed: true, note, warnings };
}

export function reject(code: number, message: string): Decision {
  return { allowed: false, code, message, note: message };
}

/** Decides one review. Throws only on unexpected failures (lookups that cannot be answered). */
export async function runWebhook(webhook: Webhook, review: AdmissionReview, deps: WebhookDeps): Promise<WebhookResult> {
  const decision = await decide(webhook, review.request, deps);
  return { review: toResponse(review, decision), decision };
}

async function decide(webhook: Webhook, request: AdmissionRequest, deps: WebhookDeps): Promise<Decision> {
  const op = request.operation;
  if (!webhook.operations.includes(op as Operation)) return allow(`operation ${String(op)} is not checked`);
  if (request.subResource) return allow(`subresource ${request.subResource} is not checked`);
  const kind = request.kind;
  if (kind && (kind.group !== webhook.group || kind.kind !== webhook.kind)) {
    return allow(`unexpected kind ${kind.group}/${kind.kind}; this webhook judges ${webhook.group}/${webhook.kind}`);
  }
  if (!isObject(request.object)) return reject(400, 'request.object is missing or not an object');
  if (op === 'UPDATE' && !isObject(request.oldObject)) {
    return reject(400, 'request.oldObject is missing or not an object on an UPDATE');
  }
  // One review asks for the same objects repeatedly (the app once per connected cluster); answer each once.
  const scoped: WebhookDeps = { ...deps, lookup: memoizeLookup(deps.lookup) };
  return webhook.decide(request as JudgedRequest, scoped);
}

/**
 * The object with namespace and name filled in from the request when the object lacks them, so rules
 * and messages always see where it lives.
 */
export function withIdentity<T extends { metadata?: Record<string, unknown> }>(
  object: T,
  request: AdmissionRequest,
): T {
  const metadata = isObject(object.metadata) ? object.metadata : {};
  const namespace = metadata.namespace ?? request.namespace;
  const name = metadata.name ?? request.name;
  if (metadata.namespace === namespace && metadata.name === name && object.metadata === metadata) return object;
  return {
    ...object,
    metadata: {
      ...metadata,
      ...(namespace !== undefined ? { namespace } : {}),
      ...(name !== undefined && name !== '' ? { name } : {}),
    },
  };
}
