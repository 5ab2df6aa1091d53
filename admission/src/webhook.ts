/**
 * A webhook is a path plus a pure decision over one AdmissionRequest; `runWebhook` puts the decision in
 * the envelope. Requests the webhook does not judge (other operations, subresources, other kinds) are
 * allowed unchanged: the configuration decides what is sent, and refusing what we do not understand
 * would turn a configuration slip into an outage.
 */
import { type PodDeliveryOptions } from '@kd-connections/shared/delivery';
import { type AppLookup, type RuleOptions } from '@kd-connections/shared/domain';
import { jsonEqual, shortJson } from '@kd-connections/shared/primitives';
import {
  toResponse,
  type AdmissionRequest,
  type AdmissionReview,
  type AdmissionReviewResponse,
  type Decision,
} from './admission-review.js';
import { LookupBudgetError, memoizeLookup } from './memoize-lookup.js';
import { ALL_NAMESPACES, outOfScope, type NamespaceScope } from './namespace-scope.js';

export interface WebhookDeps {
  lookup: AppLookup;
  /** rules.kubedirector: next to KubeDirector, the mutating webhooks change nothing. */
  rules: RuleOptions;
  /** Why this installation must not act now (the default mode's KubeDirector guard); undefined: act. */
  refusal?: () => string | undefined;
  /** The pod webhook's delivery settings; absent: the default sidecar image. */
  delivery?: PodDeliveryOptions;
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

/**
 * The JSON type of every field the decisions read, where the object's schema fixes it. A mutating
 * webhook sees an object before the API server checks it against the schema, and anything may come
 * from a client other than the API server: a field of the wrong type is a 400 naming it, rather than an
 * exception deep in a rule. `required` fields must be present; the others only when present (null
 * counts as absent). `[]` in a path means every element of that array.
 */
type Shape = [path: string, type: 'object' | 'string' | 'objects' | 'strings', required?: true];

const REQUEST_SHAPE: Shape[] = [
  ['name', 'string'],
  ['namespace', 'string'],
];
const METADATA: Shape[] = [
  ['metadata', 'object'],
  ['metadata.name', 'string'],
  ['metadata.generateName', 'string'],
  ['metadata.namespace', 'string'],
  ['metadata.labels', 'strings'],
  ['metadata.annotations', 'strings'],
];
const OBJECT_SHAPES: Record<string, Shape[]> = {
  KubeDirectorCluster: [
    ...METADATA,
    ['spec', 'object', true],
    // Connection lists and the generator of any type are handled by the rules themselves (a string
    // generator is replaced by the mutating webhook, as before).
    ['spec.app', 'string'],
  ],
  KubeDirectorApp: [...METADATA, ['spec', 'object', true]],
  Pod: [
    ...METADATA,
    ['spec', 'object', true],
    ['spec.containers', 'objects'],
    ['spec.containers[].volumeMounts', 'objects'],
    ['spec.volumes', 'objects'],
  ],
};

const TYPE_NAMES = {
  object: 'an object',
  string: 'a string',
  objects: 'a list of objects',
  strings: 'a map of strings',
};

function hasType(v: unknown, type: Shape[1]): boolean {
  switch (type) {
    case 'object':
      return isObject(v);
    case 'string':
      return typeof v === 'string';
    case 'objects':
      return Array.isArray(v) && v.every((x) => isObject(x));
    case 'strings':
      return isObject(v) && Object.values(v).every((x) => typeof x === 'string');
  }
}

/** A shape with its path split once, at load: splitting it on every review cost more than the check. */
interface CompiledShape {
  keys: { name: string; fan: boolean }[];
  type: Shape[1];
  required: boolean;
}

const compiled = new WeakMap<Shape[], CompiledShape[]>();

function compile(shapes: Shape[]): CompiledShape[] {
  let c = compiled.get(shapes);
  if (!c) {
    c = shapes.map(([path, type, required]) => ({
      keys: path
        .split('.')
        .map((key) => (key.endsWith('[]') ? { name: key.slice(0, -2), fan: true } : { name: key, fan: false })),
      type,
      required: required === true,
    }));
    compiled.set(shapes, c);
  }
  return c;
}

/** The first field of `root` whose type is wrong, as a message; undefined when all are right. */
function misshapen(prefix: string, root: unknown, shapes: Shape[]): string | undefined {
  for (const { keys, type, required } of compile(shapes)) {
    // Without a `[]` on the path it reaches one value at most: follow it without building locations.
    if (!keys.some((k) => k.fan)) {
      let v: unknown = root;
      for (const { name } of keys) v = isObject(v) ? v[name] : undefined;
      if (v === undefined || v === null ? !required : hasType(v, type)) continue;
    }
    // Every value the path reaches, with its printed location; `[]` fans out over array elements.
    let at: [string, unknown][] = [[prefix, root]];
    for (const { name, fan } of keys) {
      const next: [string, unknown][] = [];
      for (const [where, v] of at) {
        if (!isObject(v)) continue;
        const child = v[name];
        if (!fan) next.push([`${where}.${name}`, child]);
        else if (Array.isArray(child)) child.forEach((c, i) => next.push([`${where}.${name}[${i}]`, c]));
      }
      at = next;
    }
    for (const [where, v] of at) {
      if (v === undefined || v === null) {
        if (required) return `${where}: required`;
        continue;
      }
      if (!hasType(v, type)) return `${where}: must be ${TYPE_NAMES[type]}, got ${describe(v)}`;
    }
  }
  return undefined;
}

/** A value for a message: short, and safe for anything JSON can hold. */
function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return shortJson(v, 64);
  return typeof v === 'object' ? 'an object' : `${typeof v} ${JSON.stringify(v)}`;
}

export function allow(note: string, warnings: string[] = []): Decision {
  return { allowed: true, note, warnings };
}

export function reject(code: number, message: string): Decision {
  return { allowed: false, code, message, note: message };
}

/**
 * Decides one review. Throws only on unexpected failures (lookups that cannot be answered). A review
 * for a namespace outside `scope` is refused first, before anything is looked up.
 */
export async function runWebhook(
  webhook: Webhook,
  review: AdmissionReview,
  deps: WebhookDeps,
  scope: NamespaceScope = ALL_NAMESPACES,
  limits: ReviewLimits = {},
): Promise<WebhookResult> {
  const decision =
    outOfScope(review.request, scope, webhook.name === 'validate-kdapp') ??
    standDown(webhook, review.request, deps) ??
    (await decide(webhook, review.request, deps, limits));
  return { review: toResponse(review, decision), decision };
}

/** What one review may spend deciding. */
export interface ReviewLimits {
  /** performance.now() by which the decision must be made; absent: no deadline. */
  deadline?: number;
  /** performance.now() when the review arrived (for the denial's figure); default: when deciding began. */
  arrived?: number;
  /** Distinct lookups one review may make (default MAX_LOOKUPS_PER_REVIEW). */
  maxLookups?: number;
}

/**
 * Enough for the largest review the schema allows: 3 × 100 connections, each connected cluster with its
 * app (two catalogs), the cluster's own app and the cycle search (64).
 */
export const MAX_LOOKUPS_PER_REVIEW = 800;

/** How many connections a review's object lists (the number the deadline denial names). */
function connectionCount(object: unknown): number {
  const c = isObject(object) && isObject(object.spec) ? object.spec.connections : undefined;
  if (!isObject(c)) return 0;
  return ['clusters', 'configmaps', 'secrets'].reduce((n, k) => n + (Array.isArray(c[k]) ? c[k].length : 0), 0);
}

/**
 * The answer when a review ran out of time or lookups. A validating webhook denies: admitting unchecked
 * connections is what it exists to prevent, and the writer can simply retry. A mutating one allows the
 * object unchanged, which is what its failurePolicy (Ignore) would do with a timeout, minus the wait.
 */
function notChecked(webhook: Webhook, request: AdmissionRequest, why: 'deadline' | 'budget', ms: number): Decision {
  const n = connectionCount(request.object);
  const what = n > 0 ? `could not check ${n} connections` : 'could not finish the checks';
  const sentence =
    why === 'deadline'
      ? `${what} in time (${Math.round(ms)} ms, below the webhook's timeout); nothing was decided about them: try again`
      : `${what}: they need more than ${MAX_LOOKUPS_PER_REVIEW} lookups, more than one review may make`;
  if (webhook.name.startsWith('mutate-')) return allow(`not mutated: ${sentence}`);
  return reject(503, sentence);
}

/**
 * Next to KubeDirector the mutating webhooks change nothing (KubeDirector's schema prunes the generator,
 * and it delivers configmeta). While the default mode's guard refuses, mutation stops and the validating
 * webhooks deny every write they would judge with the guard's sentence (what was found, what to set): a
 * webhook at failurePolicy Fail cannot stand aside silently, and admitting unchecked connections would
 * be worse. Deletions in progress and updates that leave spec alone still pass, as they always do.
 */
function standDown(webhook: Webhook, request: AdmissionRequest, deps: WebhookDeps): Decision | undefined {
  const mutating = webhook.name.startsWith('mutate-');
  if (mutating && deps.rules.kubedirector) return allow('kubedirector mode: nothing is mutated');
  const refusal = deps.refusal?.();
  if (refusal === undefined) return undefined;
  if (mutating) return allow('not acting: KubeDirector found');
  const object = request.object as { metadata?: { deletionTimestamp?: unknown }; spec?: unknown } | undefined;
  const old = request.oldObject as { spec?: unknown } | undefined;
  if (!isObject(object) || object.metadata?.deletionTimestamp) return undefined;
  if (request.operation === 'UPDATE' && isObject(old) && jsonEqual(object.spec, old.spec)) return undefined;
  return reject(403, refusal);
}

async function decide(
  webhook: Webhook,
  request: AdmissionRequest,
  deps: WebhookDeps,
  limits: ReviewLimits,
): Promise<Decision> {
  const op = request.operation;
  // Request fields go into notes as descriptions, never through String(): a JSON object such as
  // {"toString": 1} cannot be converted to a string at all.
  if (!webhook.operations.includes(op as Operation)) return allow(`operation ${describe(op)} is not checked`);
  if (request.subResource) return allow(`subresource ${describe(request.subResource)} is not checked`);
  const kind = request.kind as unknown;
  if (kind && (!isObject(kind) || kind.group !== webhook.group || kind.kind !== webhook.kind)) {
    const what = isObject(kind) ? `${describe(kind.group)}/${describe(kind.kind)}` : describe(kind);
    return allow(`unexpected kind ${what}; this webhook judges ${webhook.group}/${webhook.kind}`);
  }
  if (!isObject(request.object)) return reject(400, 'request.object is missing or not an object');
  if (op === 'UPDATE' && !isObject(request.oldObject)) {
    return reject(400, 'request.oldObject is missing or not an object on an UPDATE');
  }
  const wrong =
    misshapen('request', request, REQUEST_SHAPE) ??
    misshapen('request.object', request.object, OBJECT_SHAPES[webhook.kind] ?? []) ??
    (op === 'UPDATE'
      ? misshapen('request.oldObject', request.oldObject, OBJECT_SHAPES[webhook.kind] ?? [])
      : undefined);
  if (wrong) return reject(400, wrong);
  // One review asks for the same objects repeatedly (the app once per connected cluster); answer each
  // once, within the review's budget of lookups and its deadline.
  const started = limits.arrived ?? performance.now();
  let expired = false;
  const scoped: WebhookDeps = {
    ...deps,
    lookup: memoizeLookup(deps.lookup, {
      maxLookups: limits.maxLookups ?? MAX_LOOKUPS_PER_REVIEW,
      expired: () => expired,
    }),
  };
  let timer: NodeJS.Timeout | undefined;
  try {
    const work = Promise.resolve().then(() => webhook.decide(request as JudgedRequest, scoped));
    if (limits.deadline === undefined) return await work;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), Math.max(0, limits.deadline! - performance.now()));
    });
    const out = await Promise.race([work, late]);
    if (out !== 'late') return out;
    // The work goes on until its next lookup, which then fails; nobody waits for it.
    expired = true;
    work.catch(() => {});
    return notChecked(webhook, request, 'deadline', performance.now() - started);
  } catch (e) {
    if (e instanceof LookupBudgetError) return notChecked(webhook, request, e.why, performance.now() - started);
    // JSON.parse takes any depth; comparing or quoting a value nested thousands of levels deep does not.
    if (e instanceof RangeError && /call stack/i.test(e.message)) {
      return reject(400, 'request.object is nested too deeply to be judged');
    }
    throw e;
  } finally {
    clearTimeout(timer);
  }
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
