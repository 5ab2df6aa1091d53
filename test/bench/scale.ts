/**
 * Every count and duration of the benchmark, per scale. `small` (the default) fits a 2-core machine in
 * a few minutes and uses the counts the targets are stated for (e.g. fan-out of 1 ConfigMap to 200 clusters × 5
 * pods); `large` (`npm run bench -- --scale large`) is for
 * machines with more cores: longer runs, more rounds and bigger object counts; `smoke` only checks
 * that the benchmark runs.
 */
export interface Scale {
  name: 'smoke' | 'small' | 'large';
  direct: {
    /** Alternating rounds of (service, baseline) at full speed; the median round is reported. */
    rounds: number;
    warmupSec: number;
    measureSec: number;
    connections: number;
    /** Fixed request rates for the latency table (requests per second). */
    rates: number[];
    rateSec: number;
  };
  apiserver: {
    /** Creates (and as many updates) per mode. */
    opsPerMode: number;
    /** Operations in flight at once. */
    concurrency: number;
    /** Operations per block; blocks alternate webhook on/off. */
    block: number;
  };
  fanout: {
    clusters: number;
    podsPerCluster: number;
    idleSec: number;
    /** Longest wait for the edit to reach every pod. */
    deadlineSec: number;
  };
  /** Member pods running as containers on one node (a runtime shim each: keep within a 2-core node). */
  inContainer: { clusters: number; podsPerCluster: number; deadlineSec: number };
  /** Edits of one ConfigMap connected to one cluster's member pods, on each kubelet setting (kubelet-defaults.ts). */
  kubeletDefaults: {
    pods: number;
    /** More member pods of the same cluster served by the node-agent prototype (node-agent.ts) instead of the sidecar. */
    agentPods: number;
    edits: number;
    deadlineSec: number;
  };
  memory: {
    clusters: number;
    podsPerCluster: number;
    /** Objects created at once (the API server's mutating in-flight limit is 200). */
    createConcurrency: number;
    /** Longest wait for the reconciler to deliver to every pod once it leads. */
    deliveryDeadlineSec: number;
  };
  /**
   * Where cost grows (admission-growth, reconciler-growth): connections per cluster in the reviews, at
   * `rate` reviews/s; member pods of the growing cluster set (5 per cluster).
   */
  growth: { connections: number[]; rate: number; pods: number[] };
  /** Objects created at once in the smaller sections. */
  createConcurrency: number;
}

export const SCALES: Record<Scale['name'], Scale> = {
  /** Checks that the benchmark itself works end to end in about two minutes; its figures mean little. */
  smoke: {
    name: 'smoke',
    direct: { rounds: 1, warmupSec: 1, measureSec: 3, connections: 8, rates: [200, 500], rateSec: 2 },
    apiserver: { opsPerMode: 40, concurrency: 4, block: 20 },
    fanout: { clusters: 20, podsPerCluster: 5, idleSec: 10, deadlineSec: 60 },
    inContainer: { clusters: 2, podsPerCluster: 2, deadlineSec: 120 },
    kubeletDefaults: { pods: 2, agentPods: 1, edits: 3, deadlineSec: 120 },
    memory: { clusters: 100, podsPerCluster: 5, createConcurrency: 16, deliveryDeadlineSec: 60 },
    growth: { connections: [1, 10, 30], rate: 200, pods: [100, 250, 500] },
    createConcurrency: 16,
  },
  small: {
    name: 'small',
    direct: { rounds: 5, warmupSec: 2, measureSec: 6, connections: 16, rates: [200, 500, 1000], rateSec: 5 },
    apiserver: { opsPerMode: 300, concurrency: 4, block: 50 },
    fanout: { clusters: 200, podsPerCluster: 5, idleSec: 60, deadlineSec: 120 },
    inContainer: { clusters: 10, podsPerCluster: 5, deadlineSec: 300 },
    kubeletDefaults: { pods: 7, agentPods: 7, edits: 200, deadlineSec: 150 },
    memory: { clusters: 2000, podsPerCluster: 5, createConcurrency: 24, deliveryDeadlineSec: 240 },
    growth: { connections: [1, 3, 10, 30, 100], rate: 500, pods: [1000, 2500, 5000, 10_000] },
    createConcurrency: 16,
  },
  large: {
    name: 'large',
    direct: { rounds: 5, warmupSec: 5, measureSec: 15, connections: 32, rates: [200, 500, 1000, 2000], rateSec: 10 },
    apiserver: { opsPerMode: 1000, concurrency: 16, block: 100 },
    fanout: { clusters: 1000, podsPerCluster: 5, idleSec: 60, deadlineSec: 300 },
    inContainer: { clusters: 20, podsPerCluster: 5, deadlineSec: 600 },
    kubeletDefaults: { pods: 7, agentPods: 7, edits: 200, deadlineSec: 150 },
    memory: { clusters: 10_000, podsPerCluster: 5, createConcurrency: 64, deliveryDeadlineSec: 1200 },
    growth: { connections: [1, 3, 10, 30, 100], rate: 500, pods: [1000, 2500, 5000, 10_000, 25_000, 50_000] },
    createConcurrency: 32,
  },
};
