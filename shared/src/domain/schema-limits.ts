/**
 * The length limits the kdapp and kdcluster CRD schemas state (charts/kd-connections/files/crds), for
 * the checks the webhooks make before any other work: a review posted straight to the service has not
 * been through the API server's schema, and a megabyte where the schema allows 128 characters must cost
 * a comparison, not a parse. shared/test/schema-limits.test.ts reads the CRD files and fails when
 * these and the schema disagree.
 */
import { DNS1123_SUBDOMAIN_MAX } from './names.js';

export const SCHEMA_LIMITS = {
  /** kdapp spec.connectable_to: maxItems. */
  connectableToItems: 64,
  /** kdapp spec.category and connectable_to[].category: maxLength. */
  category: 63,
  /** kdapp spec.distroID and connectable_to[].distroID: maxLength. */
  distroID: 253,
  /** kdapp spec.version and connectable_to[].version: maxLength. */
  version: 128,
  /** kdcluster spec.connections.{clusters,configmaps,secrets}: maxItems. */
  connectionItems: 100,
  /** kdcluster spec.app and every connection name: maxLength (an RFC 1123 subdomain). */
  name: DNS1123_SUBDOMAIN_MAX,
} as const;

/** "has 5001 entries; at most 100 (the CRD schema's maxItems)", or undefined when within it. */
export function tooManyItems(value: unknown, max: number): string | undefined {
  if (!Array.isArray(value) || value.length <= max) return undefined;
  return `has ${value.length} entries; at most ${max} are allowed (the CRD schema's maxItems)`;
}

/** "has 1048576 characters; at most 128 …", or undefined when within it (or not a string). */
export function tooLong(value: unknown, max: number): string | undefined {
  if (typeof value !== 'string' || value.length <= max) return undefined;
  return `has ${value.length} characters; at most ${max} are allowed (the CRD schema's maxLength)`;
}
