/** ZDS vocabulary and wire codec (see messages.ts, codec.ts, zds.proto). */
export * from './messages.js';
export * from './codec.js';
