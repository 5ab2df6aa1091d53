/**
 * Runs the benchmark from its TypeScript sources: `node --import ./test/bench/ts-loader.mjs test/bench/run.ts`.
 * The helpers it reuses (test/support, test/e2e, test/controlplane) find the repository from their own
 * location (`../..`), which only holds for the sources, not for a copy compiled into test/dist. The hooks
 * below transpile each .ts file on load (no type check: `npm run typecheck` covers test/**), and map the
 * NodeNext-style `./x.js` specifiers of a .ts file to `./x.ts`. Workspace packages load from their dist/.
 */
import { register } from 'node:module';

register('./ts-hooks.mjs', import.meta.url);
