/** A violation tied to the field it is about, printed the way the API server prints its own. */
export interface FieldError {
  /** e.g. "spec.connections.clusters[1]" */
  field: string;
  message: string;
}

export interface RuleResult {
  errors: FieldError[];
  warnings: string[];
}

export function formatFieldError(e: FieldError): string {
  return `${e.field}: ${e.message}`;
}

/**
 * One line per violation, so kubectl shows every problem at once. The leading line names the object
 * (the API server prefixes the webhook name; the object is ours to name).
 */
export function denialMessage(
  kind: string,
  namespace: string | undefined,
  name: string | undefined,
  errors: FieldError[],
): string {
  const where = namespace ? `${namespace}/${name ?? ''}` : (name ?? '');
  const count = errors.length === 1 ? '1 problem' : `${errors.length} problems`;
  return [`${kind} ${where} is not valid (${count}):`, ...errors.map((e) => `- ${formatFieldError(e)}`)].join('\n');
}
