// ESM entry of ctxkeel/ai-sdk: the CommonJS module, re-exported.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
export const { compactStep } = require('./ai-sdk.js');
