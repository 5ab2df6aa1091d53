/**
 * A review's deadline: the configured one, lowered below the timeout the API server gives the call
 * (it appends ?timeout=3s, the webhook's timeoutSeconds), so that the service always answers first —
 * with a clear denial rather than the API server's "context deadline exceeded". Pure.
 */
import { durationMs } from '@kd-connections/shared/runtime';

/** What is kept back from the API server's timeout for the answer to travel. */
export const ANSWER_MARGIN_MS = 500;
/** Never less than this, whatever the caller's timeout says. */
export const MIN_DEADLINE_MS = 1;

/** Milliseconds from the review's arrival to its deadline. */
export function reviewDeadlineMs(url: string | undefined, configuredMs: number): number {
  const q = url?.indexOf('?') ?? -1;
  if (!url || q < 0) return configuredMs;
  const timeout = new URLSearchParams(url.slice(q + 1)).get('timeout');
  const ms = timeout === null ? undefined : durationMs(timeout);
  if (ms === undefined || ms <= 0) return configuredMs;
  return Math.max(MIN_DEADLINE_MS, Math.min(configuredMs, ms - ANSWER_MARGIN_MS));
}
