/**
 * The AdmissionReview envelope: checking what arrives (a 400 names the first problem) and shaping what
 * goes back (uid and apiVersion echoed, patch base64-encoded only when non-empty, warnings only when
 * there are some). Pure; no I/O.
 */
import { shortJson, type PatchOp } from '@kd-connections/shared/primitives';

/** v1 is what the webhook configurations register; v1beta1 has the same shape and is answered in kind. */
export const SUPPORTED_API_VERSIONS = ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1'] as const;
export type AdmissionApiVersion = (typeof SUPPORTED_API_VERSIONS)[number];

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

export interface AdmissionRequest {
  uid: string;
  kind?: GroupVersionKind;
  resource?: { group: string; version: string; resource: string };
  subResource?: string;
  name?: string;
  namespace?: string;
  operation?: string;
  object?: unknown;
  oldObject?: unknown;
  dryRun?: boolean;
  [key: string]: unknown;
}

export interface AdmissionReview {
  apiVersion: AdmissionApiVersion;
  kind: 'AdmissionReview';
  request: AdmissionRequest;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: { code: number; reason?: string; message: string };
  patchType?: 'JSONPatch';
  /** base64 of the JSON Patch document */
  patch?: string;
  warnings?: string[];
}

export interface AdmissionReviewResponse {
  apiVersion: AdmissionApiVersion;
  kind: 'AdmissionReview';
  response: AdmissionResponse;
}

/** What a webhook decided, before it is put in an envelope. */
export interface Decision {
  allowed: boolean;
  /** Set on denials: 403 for rule violations, 400 for a request the webhook cannot judge. */
  code?: number;
  message?: string;
  patch?: PatchOp[];
  warnings?: string[];
  /** For logs only: why (e.g. "connections changed", "not a member pod"). */
  note?: string;
  /** For logs only: the field paths of the violations. */
  fields?: string[];
}

export type ParseResult = { ok: true; review: AdmissionReview } | { ok: false; message: string };

function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return shortJson(v, 64);
  return typeof v === 'object' ? 'an object' : `${typeof v} ${String(v)}`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Checks a decoded body; the messages are what a 400 answer says. */
export function parseAdmissionReview(body: unknown): ParseResult {
  if (!isObject(body)) return { ok: false, message: `expected an AdmissionReview object, got ${describe(body)}` };
  if (body.kind !== 'AdmissionReview') {
    return { ok: false, message: `kind must be "AdmissionReview", got ${describe(body.kind)}` };
  }
  if (!SUPPORTED_API_VERSIONS.includes(body.apiVersion as AdmissionApiVersion)) {
    return {
      ok: false,
      message: `apiVersion must be "admission.k8s.io/v1" (or v1beta1), got ${describe(body.apiVersion)}`,
    };
  }
  const request = body.request;
  if (request === undefined || request === null) {
    return { ok: false, message: 'request is missing: an AdmissionReview sent to a webhook carries a request' };
  }
  if (!isObject(request)) return { ok: false, message: `request must be an object, got ${describe(request)}` };
  if (typeof request.uid !== 'string' || request.uid === '') {
    return {
      ok: false,
      message: `request.uid is missing or empty (got ${describe(request.uid)}): the API server matches the response to the request by it`,
    };
  }
  return { ok: true, review: body as unknown as AdmissionReview };
}

/**
 * Warnings travel in HTTP Warning headers, which cannot carry control characters; the API server
 * drops a warning it cannot encode, so keep each one on a single line.
 */
export function sanitizeWarning(w: string): string {
  // eslint-disable-next-line no-control-regex
  return w.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
}

export function toResponse(review: AdmissionReview, d: Decision): AdmissionReviewResponse {
  const response: AdmissionResponse = { uid: review.request.uid, allowed: d.allowed };
  if (!d.allowed) {
    const code = d.code ?? 403;
    response.status = {
      code,
      // kubectl prints "Error from server (<reason>)"; Forbidden reads right for a rule violation.
      reason: code === 403 ? 'Forbidden' : code === 400 ? 'BadRequest' : 'InternalError',
      message: d.message ?? 'denied',
    };
  }
  if (d.allowed && d.patch && d.patch.length > 0) {
    response.patchType = 'JSONPatch';
    response.patch = Buffer.from(JSON.stringify(d.patch)).toString('base64');
  }
  const warnings = (d.warnings ?? []).map(sanitizeWarning).filter((w) => w !== '');
  if (warnings.length > 0) response.warnings = warnings;
  return { apiVersion: review.apiVersion, kind: 'AdmissionReview', response };
}
