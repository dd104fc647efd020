// ESM entry of ctxkeel/langchain: the CommonJS module, re-exported.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
export const { compactionMiddleware, preModelHook, toDict } = require('./langchain.js');
