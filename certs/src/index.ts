export * from './generate.js';
export * from './inspect.js';
export * from './renewal.js';
export * from './bootstrap-plan.js';
export * from './inject.js';
export * from './webhook-path-token.js';
export * from './cli.js';
