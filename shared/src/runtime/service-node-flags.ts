/**
 * Node options each service runs with: in its image (images/src/service-images.ts puts them on the
 * entrypoint's command line) and when run as a local process (npm start, the tests and the bench, through test/support/services.ts: first in
 * NODE_OPTIONS, so a bench A/B can override them).
 *
 * Reconciler: V8's young generation capped per semi-space, because Node sizes it from the machine's
 * memory and a list+watch sync grows it to that maximum, where it stays.
 * Admission: a smaller young generation (reviews are small and short-lived) and an old generation sized
 * for the live heap plus one review at the body limit (--max-in-flight-mib lets one in at a time) plus the
 * caches of a large cluster.
 * Why these numbers (the A/B runs): docs/performance.md and docs/reliability.md, "Hostile reviews against
 * admission".
 */
export const SERVICE_NODE_FLAGS: Record<'admission' | 'reconciler', readonly string[]> = {
  admission: ['--max-semi-space-size=2', '--max-old-space-size=128'],
  reconciler: ['--max-semi-space-size=8'],
};
