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
    '^@kd-connections/(certs|images)$': '<rootDir>/$1/src/index.ts',
    // shared/ has one entry point per concern (shared/src/<concern>/index.ts), no package-wide barrel.
    '^@kd-connections/shared/([a-z-]+)$': '<rootDir>/shared/src/$1/index.ts',
  },
  testEnvironment: 'node',
  rootDir: '.',
};

// One kubelet per machine: the own-node project runs only on its own (npm test runs it last, as test:own-node),
// never beside the suite's shared node.
if (process.env.KD_TEST_OWN_NODE === '1' && process.env.KD_TEST_NODE !== '0')
  throw new Error("KD_TEST_OWN_NODE=1 needs KD_TEST_NODE=0: the suite's shared node and an own node cannot both run");
const ownNode =
  process.env.KD_TEST_OWN_NODE === '1'
    ? [
        {
          ...common,
          displayName: 'own-node',
          testMatch: ['<rootDir>/test/kubedirector/**/*.own-node.test.ts'],
          slowTestThreshold: 120,
        },
      ]
    : [];

/** @type {import('jest').Config} */
export default {
  // Pure logic and handlers, no cluster.
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: [
        '<rootDir>/{shared,certs,admission,reconciler,cli}/test/**/*.test.ts',
        '<rootDir>/test/images/**/*.test.ts',
        '<rootDir>/test/docs/**/*.test.ts',
        '<rootDir>/test/bench/**/*.test.ts',
        '<rootDir>/test/controlplane/**/*.test.ts',
        '<rootDir>/test/kubedirector/**/*.unit.test.ts',
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
      // *.own-node.test.ts start a control plane AND a node of their own (the real KubeDirector's CRDs
      // cannot share the suite's API server, and a kubelet joins one): project `own-node` below.
      testPathIgnorePatterns: ['\\.own-node\\.test\\.ts$', '\\.unit\\.test\\.ts$'],
      slowTestThreshold: 30,
    },
    ...ownNode,
  ],
  testTimeout: 60_000,
  // Three test files at once on CI's two cores: the cluster tests mostly wait on the API server, the
  // kubelet and timers (with two workers the machine was about half busy), so a third cuts the run
  // (jest 911 s with two on a fresh clone of 4d6b8fe, 709 s with three on the same test code) without
  // starving any; every test must hold under that load anyway.
  maxWorkers: 3,
};
