export * from './lock/index.js';
export * from './core/errors.js';
export { toMs, type Duration } from './core/duration.js';
