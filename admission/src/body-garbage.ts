/**
 * Collects the garbage large request bodies leave, before the next one piles its own on top. V8 collects
 * when allocation asks for it, and counts a Buffer's bytes (outside its heap) only loosely: a flood of
 * reviews at the body limit left tens of MiB of dead bodies, texts and parses behind before it ran, and
 * with them the admission process past 60 % of its memory limit (docs/reliability.md, "Hostile reviews").
 *  - after a large review was read and answered (one is in flight at a time, see ReviewLimiter): one full
 *    collection, only ever caused by bodies of a MiB or more;
 *  - while bodies are read (each chunk copied into the review's buffer) or drained (refused bodies, read
 *    and dropped, see discardRest): a young-generation collection per BODY_BYTES_PER_MINOR, which frees
 *    the chunks' wrappers and with them their bytes, so a 7 MiB body never has its chunks lying beside it.
 */
import { fullCollection, minorCollection } from '@kd-connections/shared/runtime';

export const BODY_BYTES_PER_MINOR = 2 ** 20;

export interface BodyGarbageCollectors {
  full(): void;
  minor(): void;
}

export class BodyGarbage {
  private consumedBytes = 0;

  constructor(private readonly collect: BodyGarbageCollectors = { full: fullCollection, minor: minorCollection }) {}

  /** A review of a large body was read and answered. */
  afterLargeReview(): void {
    this.collect.full();
  }

  /** A chunk of a request body was copied or dropped: its bytes are garbage now. */
  consumed(bytes: number): void {
    this.consumedBytes += bytes;
    if (this.consumedBytes < BODY_BYTES_PER_MINOR) return;
    this.consumedBytes = 0;
    this.collect.minor();
  }
}
