export * from './cached-lookup.js';
