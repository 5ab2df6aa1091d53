/**
 * The V8 flags the reconciler runs with: the image sets them as NODE_OPTIONS, and `npm start`, the
 * tests and the benchmark pass the same. Node 24 sizes V8's young generation from the machine's memory
 * (on a 24 GiB machine each of its two semi-spaces grows to 64 MiB, Node 20 stopped at 16), and once a
 * burst of list pages or patches has grown it, those 128 MiB stay resident while the process is busy.
 * The reconciler's garbage is short-lived and small (pages, patches, watch lines); 16 MiB semi-spaces
 * cost it no measurable delivery time (test/bench/results/2026-12-03-rss-ab.md).
 */
export const RECONCILER_NODE_OPTIONS = '--max-semi-space-size=16';
