/** The image builder, for the test harness (the CLI is build.ts: `npm run images`). */
export * from './git-revision.js';
export * from './guestconfig-image.js';
export * from './image-inputs.js';
export * from './oci-image.js';
export * from './production-closure.js';
export * from './push.js';
export * from './release.js';
export * from './kubectl-plugin-package.js';
export * from './sbom.js';
export * from './service-images.js';
