// Type declarations for the ESM entry point (node/index.mjs): the same module as node/index.js,
// whose declarations (node/index.d.ts) are re-exported here as named exports and as the
// default export.
import * as ctxkeel from './index.js';

export * from './index.js';
export default ctxkeel;
