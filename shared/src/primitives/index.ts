export * from './object-key.js';
export * from './bounded-memo.js';
export * from './short-json.js';
export * from './json-patch.js';
export * from './canonical-json.js';
export * from './json-equal.js';
export * from './hash.js';
