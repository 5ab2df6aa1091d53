/**
 * Reading an AdmissionReview body the way controller-runtime does: the content type is checked before
 * a byte is read (415), a declared Content-Length over the limit is refused at once, and the limit is
 * also counted while streaming (a chunked body carries no length), so an oversized body is refused
 * (413) without buffering it: reading stops at the first byte past the limit.
 */
import type { IncomingMessage } from 'node:http';

/** controller-runtime's limit; an UPDATE review carries object and oldObject. */
export const MAX_BODY_BYTES = 7 * 1024 * 1024;

export type BodyResult =
  { ok: true; body: Buffer } | { ok: false; status: 400 | 413 | 415; message: string; reason: string };

const mib = (n: number) => `${+(n / (1024 * 1024)).toFixed(2)} MiB`;

/** The check made before reading: content type, encoding and declared length. */
export function precheck(req: IncomingMessage, limit = MAX_BODY_BYTES): BodyResult | undefined {
  const type = req.headers['content-type'];
  const media = (type ?? '').split(';')[0]!.trim().toLowerCase();
  if (media !== 'application/json') {
    return {
      ok: false,
      status: 415,
      reason: 'content-type',
      message: `Content-Type must be application/json, got ${type === undefined ? 'none' : JSON.stringify(type)}`,
    };
  }
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
    return {
      ok: false,
      status: 415,
      reason: 'content-encoding',
      message: `Content-Encoding ${JSON.stringify(encoding)} is not supported; send the AdmissionReview uncompressed`,
    };
  }
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    return {
      ok: false,
      status: 413,
      reason: 'too-large',
      message: `request body of ${declared} bytes exceeds the limit of ${limit} bytes (${mib(limit)})`,
    };
  }
  return undefined;
}

/**
 * Reads the body, stopping (and pausing the socket) as soon as it passes `limit`. `onChunk` is told the
 * size of each chunk copied into the body's buffer (the chunk is garbage from then on).
 */
export function readBody(
  req: IncomingMessage,
  limit = MAX_BODY_BYTES,
  onChunk?: (bytes: number) => void,
): Promise<BodyResult> {
  return new Promise((resolve) => {
    // With a declared length (the API server always sends one) the body is copied into one buffer as
    // it arrives: no list of chunks plus their concatenation, two copies, at the peak.
    const declared = Number(req.headers['content-length']);
    const into =
      Number.isSafeInteger(declared) && declared > 0 && declared <= limit ? Buffer.allocUnsafe(declared) : undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (r: BodyResult) => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      resolve(r);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        // Stop reading: what was read is dropped, the rest stays in the socket, which closes after the answer.
        req.pause();
        chunks.length = 0;
        settle({
          ok: false,
          status: 413,
          reason: 'too-large',
          message: `request body exceeds the limit of ${limit} bytes (${mib(limit)})`,
        });
        return;
      }
      if (!into) chunks.push(chunk);
      // The parser never delivers more than the declared length; a body that did would be cut here.
      else if (size <= into.length) chunk.copy(into, size - chunk.length);
      if (into) onChunk?.(chunk.length); // copied: garbage now (a kept chunk, without a length, is not)
    };
    const onEnd = () =>
      settle({ ok: true, body: into ? into.subarray(0, Math.min(size, into.length)) : Buffer.concat(chunks, size) });
    const onError = () =>
      settle({ ok: false, status: 400, reason: 'aborted', message: 'request body could not be read' });
    const onClose = () => {
      if (!req.complete)
        settle({ ok: false, status: 400, reason: 'aborted', message: 'request aborted before the body was complete' });
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/** How much of a refused body is read and dropped before answering, at most (see discardRest). */
export const DISCARD_MAX_BYTES = 8 * 1024 * 1024;
export const DISCARD_MAX_MS = 500;

/**
 * Reads and drops what is left of a refused body (413 and the like) before the answer is sent. The
 * answer closes the connection, and a socket closed with unread data sends a TCP reset: a client still
 * writing the body would get EPIPE or ECONNRESET and never read the 413 (Go's net/http avoids the same
 * with a lingering close). Bounded in bytes and time, so a body that never ends still gets its answer;
 * nothing is kept in memory.
 */
export function discardRest(
  req: IncomingMessage,
  o: { maxBytes?: number; maxMs?: number; onDropped?: ((bytes: number) => void) | undefined } = {},
): Promise<void> {
  const { maxBytes = DISCARD_MAX_BYTES, maxMs = DISCARD_MAX_MS, onDropped } = o;
  return new Promise((resolve) => {
    if (req.complete || req.destroyed) return resolve();
    // A declared body larger than what would be dropped is answered at once: waiting could not help.
    if (Number(req.headers['content-length'] ?? 0) > maxBytes) return resolve();
    let dropped = 0;
    const done = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', done);
      req.off('close', done);
      req.off('error', done);
      req.pause();
      resolve();
    };
    const onData = (chunk: Buffer) => {
      dropped += chunk.length;
      onDropped?.(chunk.length);
      if (dropped > maxBytes) done();
    };
    const timer = setTimeout(done, maxMs);
    req.on('data', onData);
    req.on('end', done);
    req.on('close', done);
    req.on('error', done);
    req.resume();
  });
}

export type JsonResult = { ok: true; value: unknown } | { ok: false; message: string; reason: string };

export function parseJson(body: Buffer): JsonResult {
  if (body.length === 0) {
    return { ok: false, reason: 'empty', message: 'request body is empty; expected an AdmissionReview' };
  }
  try {
    return { ok: true, value: JSON.parse(body.toString('utf8')) };
  } catch (e) {
    return { ok: false, reason: 'invalid-json', message: `request body is not valid JSON: ${(e as Error).message}` };
  }
}
