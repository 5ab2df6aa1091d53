/**
 * What of a hook's output may leave the member pod. Events are read by everyone with view rights in the
 * namespace, more than may read the cluster's Secrets, and an app's startscript can print what it was
 * given (a connected Secret's value, in plain text or base64, as configcli hands it out). So the
 * excerpt is bounded, has no control characters (no terminal escapes, one line) and carries none of the
 * values of the Secrets the cluster connects.
 */

/** How one hook run (startscript --reconnect, --addnodes, --delnodes) ended. */
export type HookOutcome =
  | { ok: true }
  /** stderrTail: the end of the hook's stderr, already masked (hookOutputExcerpt). */
  | { ok: false; exitCode?: number; timedOutMs?: number; error?: string; stderrTail?: string };

/** The failure in words, for status and the conditions (no output: that goes to the event only). */
export function describeFailure(o: HookOutcome): string {
  if (o.ok) return 'succeeded';
  if (o.timedOutMs !== undefined) return `no answer within ${o.timedOutMs} ms: abandoned`;
  if (o.exitCode !== undefined) return `exit code ${o.exitCode}`;
  return `exec failed: ${(o.error ?? 'unknown error').slice(0, HOOK_EXCERPT_CHARS)}`;
}

/** Characters of a hook's stderr an event carries, at most (its end: where a failure is usually said). */
export const HOOK_EXCERPT_CHARS = 256;
/** Characters of it the reconciler's own log line carries, masked the same way. */
export const HOOK_LOG_CHARS = 4096;
/** Values shorter than this are not masked: they would blank ordinary words of the output. */
export const MIN_MASKED_CHARS = 4;
export const MASK = '[redacted]';

/** The `base64` command's line length: longer encodings are printed wrapped. */
const BASE64_LINE = 76;

/**
 * Each value in the forms a startscript is likely to print it: as given, without a trailing newline, and
 * base64 (configmeta's form) whole and as the `base64` command wraps it. A value inside a larger
 * encoding (`user:pass` encoded together) cannot be recognised.
 */
function forms(values: Iterable<string>): string[] {
  const out = new Set<string>();
  const add = (f: string) => {
    if (f.length >= MIN_MASKED_CHARS) out.add(f);
  };
  for (const v of values) {
    for (const plain of [v, v.replace(/\r?\n$/, '')]) {
      add(plain);
      const b64 = Buffer.from(plain, 'utf8').toString('base64');
      add(b64);
      for (let i = 0; b64.length > BASE64_LINE && i < b64.length; i += BASE64_LINE) add(b64.slice(i, i + BASE64_LINE));
    }
  }
  // Longest first, so a value containing another is masked whole.
  return [...out].sort((a, b) => b.length - a.length);
}

/**
 * The last `max` characters of `text`, with every form of every value in `secrets` replaced by MASK
 * (before cutting, so a value the cut would halve is still masked whole) and control characters by a
 * space.
 */
export function hookOutputExcerpt(text: string, secrets: Iterable<string>, max = HOOK_EXCERPT_CHARS): string {
  let masked = text;
  for (const f of forms(secrets)) {
    masked = masked.split(f).join(MASK);
    // The text is itself a tail: a value it starts in the middle of is masked too.
    for (let k = f.length - 1; k >= MIN_MASKED_CHARS; k--) {
      if (masked.startsWith(f.slice(-k))) {
        masked = MASK + masked.slice(k);
        break;
      }
    }
  }
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is removed
  const clean = masked.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').trim();
  return clean.length > max ? `…${clean.slice(-(max - 1))}` : clean;
}
