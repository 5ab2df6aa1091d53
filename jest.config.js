// Jest runs the TypeScript sources directly as native ESM (node --experimental-vm-modules):
// @kubernetes/client-node (1.x and 2.x) is ESM-only, so the CommonJS default cannot load it.
// Type checking is `tsc -b` (npm run typecheck); ts-jest only transpiles, which keeps runs fast.
const transform = {
  '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.jest.json' }],
};
const common = {
  extensionsToTreatAsEsm: ['.ts'],
  transform,
  moduleNameMapper: {
    // Sources import siblings as './x.js' (NodeNext); jest must find './x.ts'.
    '^(\\.{1,2}/.*)\\.js$': '$1',
    '^@kd-connections/(shared|certs)$': '<rootDir>/$1/src/index.ts',
  },
  testEnvironment: 'node',
  rootDir: '.',
};

/** @type {import('jest').Config} */
export default {
  // Pure logic and handlers, no cluster.
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: [
        '<rootDir>/{shared,certs,admission,reconciler}/test/**/*.test.ts',
        '<rootDir>/test/images/**/*.test.ts',
        '<rootDir>/test/controlplane/**/*.test.ts',
      ],
    },
    {
      ...common,
      // Everything that needs a real etcd + kube-apiserver. The global setup starts one control plane
      // for the whole run; it only runs when a test of this project is selected.
      displayName: 'cluster',
      testMatch: ['<rootDir>/test/{smoke,integration,e2e,chart,reliability,node,gitops,kubedirector}/**/*.test.ts'],
      globalSetup: '<rootDir>/test/jest/global-setup.js',
      globalTeardown: '<rootDir>/test/jest/global-teardown.js',
      slowTestThreshold: 30,
    },
  ],
  testTimeout: 60_000,
  maxWorkers: 2,
};
