/**
 * A full garbage collection of the kind V8 runs under memory pressure (it compacts and returns free pages
 * to the system), on demand. V8's gc extension is exposed to one new context only (the idiom jest's leak
 * detector uses), so no node flag is needed and no other code can call it.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type GcFunction = (options: { type: 'major' | 'minor'; execution: 'sync'; flavor?: 'last-resort' }) => void;

let gcFunction: GcFunction | undefined;

function gc(): GcFunction {
  if (!gcFunction) {
    setFlagsFromString('--expose-gc');
    gcFunction = runInNewContext('gc') as GcFunction;
    setFlagsFromString('--no-expose-gc');
  }
  return gcFunction;
}

/** Runs one full, memory-reducing collection now (synchronous: the event loop waits for it). */
export function fullCollection(): void {
  gc()({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/** Runs one young-generation collection now: frees short-lived buffers (and their off-heap bytes) at once. */
export function minorCollection(): void {
  gc()({ type: 'minor', execution: 'sync' });
}
