export * from './pod-delivery.js';
export * from './guestconfig-sidecar-program.js';
