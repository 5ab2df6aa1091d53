/** Kubernetes object-name rules (RFC 1123), as apimachinery's validation package states them. */

const DNS1123_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_SUBDOMAIN_RE = new RegExp(`^${DNS1123_LABEL}(\\.${DNS1123_LABEL})*$`);
export const DNS1123_SUBDOMAIN_MAX = 253;
/** Names quoted in messages: whole up to a little over the longest valid one, cut beyond (shortJson). */
export const SHOWN_NAME_MAX = DNS1123_SUBDOMAIN_MAX + 3;
/** The longest label value (and RFC 1123 label, e.g. a namespace name). */
export const LABEL_VALUE_MAX = 63;
/** A namespace name (RFC 1123 label, at most 63 characters). */
export const DNS1123_LABEL_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** Why `name` is not a valid object name, or undefined when it is. */
export function invalidObjectName(name: unknown): string | undefined {
  if (typeof name !== 'string') return `must be a string, not ${name === null ? 'null' : typeof name}`;
  if (name === '') return 'must not be empty';
  if (name.includes('/')) return 'must be a name in the same namespace, without a "namespace/" prefix';
  if (name.length > DNS1123_SUBDOMAIN_MAX)
    return `must be at most ${DNS1123_SUBDOMAIN_MAX} characters (has ${name.length})`;
  if (!DNS1123_SUBDOMAIN_RE.test(name)) {
    return "must be a lowercase RFC 1123 name: letters a-z, digits, '-' and '.', starting and ending with a letter or digit";
  }
  return undefined;
}
