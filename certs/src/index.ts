export * from './generate.js';
export * from './inspect.js';
export * from './ca-secret.js';
export * from './bundle-merge.js';
export * from './inject.js';
export * from './cli.js';
