/** A validating webhook's answer from shared/'s rule result: allowed with warnings, or 403 naming every problem. */
import { denialMessage, type RuleResult } from '@kd-connections/shared/domain';
import type { Decision } from '../admission-review.js';

export function ruleDecision(
  kind: string,
  meta: { namespace?: string; name?: string; generateName?: string } | undefined,
  result: RuleResult,
  note: string,
): Decision {
  if (result.errors.length === 0) return { allowed: true, warnings: result.warnings, note };
  return {
    allowed: false,
    code: 403,
    message: denialMessage(kind, meta?.namespace, meta?.name ?? meta?.generateName, result.errors),
    warnings: result.warnings,
    fields: result.errors.map((e) => e.field),
  };
}
