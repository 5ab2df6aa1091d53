/**
 * Node options each service runs with: in its image (images/src/service-images.ts puts them on the
 * entrypoint's command line) and when run as a local process (npm start, the tests and the bench, through test/support/services.ts: first in
 * NODE_OPTIONS, so a bench A/B can override them).
 *
 * Reconciler: V8's young generation capped at 8 MiB per semi-space: Node 24 sizes it from the machine's
 * memory, and a list+watch sync grows it to the maximum, where it stays (the A/B: docs/performance.md,
 * test/bench/results/2026-12-03-rss-*.md).
 * Admission: the young generation capped at 2 MiB per semi-space (reviews are small and short-lived; a
 * flood of reviews at the body limit peaks ~10 MiB lower than at 8 MiB, 3 MiB less idle) and the old
 * generation at 128 MiB (the live heap is ~12 MiB plus one review at the body limit, as
 * --max-in-flight-mib=8 lets one in at a time; the rest is headroom for the caches of a large cluster).
 * Measurements: docs/reliability.md, "Hostile reviews against admission".
 */
export const SERVICE_NODE_FLAGS: Record<'admission' | 'reconciler', readonly string[]> = {
  admission: ['--max-semi-space-size=2', '--max-old-space-size=128'],
  reconciler: ['--max-semi-space-size=8'],
};
