export * from './connection-graph.js';
export * from './render-connection-graph.js';
export * from './explain-cluster.js';
