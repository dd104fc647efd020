// ESM entry of ctxkeel/openai-agents: the CommonJS module, re-exported.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
export const { callModelInputFilter } = require('./openai-agents.js');
