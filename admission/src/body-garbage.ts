/**
 * Collects the garbage large request bodies leave, before the next one piles its own on top. V8 collects
 * when allocation asks for it, and counts a Buffer's bytes (outside its heap) only loosely: a flood of
 * reviews at the body limit left tens of MiB of dead bodies, texts and parses behind before it ran, and
 * with them the admission process past 60 % of its memory limit (docs/reliability.md, "Hostile reviews").
 *  - after a large review was read and answered (one is in flight at a time, see ReviewLimiter): one full
 *    collection, only ever caused by bodies of a MiB or more;
 *  - while refused bodies are drained (read and dropped, see discardRest): a young-generation collection
 *    per DRAINED_BYTES_PER_MINOR, which frees the chunks' wrappers and with them their bytes.
 */
import { fullCollection, minorCollection } from '@kd-connections/shared';

export const DRAINED_BYTES_PER_MINOR = 8 * 2 ** 20;

export interface BodyGarbageCollectors {
  full(): void;
  minor(): void;
}

export class BodyGarbage {
  private drained = 0;

  constructor(private readonly collect: BodyGarbageCollectors = { full: fullCollection, minor: minorCollection }) {}

  /** A review of a large body was read and answered. */
  afterLargeReview(): void {
    this.collect.full();
  }

  /** Bytes of a refused body were read and dropped. */
  dropped(bytes: number): void {
    this.drained += bytes;
    if (this.drained < DRAINED_BYTES_PER_MINOR) return;
    this.drained = 0;
    this.collect.minor();
  }
}
