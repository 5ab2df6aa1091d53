export * from './presence.js';
export * from './guard.js';
