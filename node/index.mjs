// ESM entry point: the same module as node/index.js (one addon instance, one set of error
// classes), re-exported as named exports and as the default export.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const ctxkeel = require('./index.js');

export const {
  estimateTokens,
  checkPairs,
  repairPairs,
  parseAnchors,
  mergeAnchors,
  Compactor,
  HttpSummarizer,
  replay,
  Replay,
  readEvidenceTool,
  version,
  statusCodes,
  CtxkeelError,
  InputError,
} = ctxkeel;

// `Error` is exported under its Python name too; it is bound under another local name so that
// this module's own `Error` stays the global one.
const ErrorClass = ctxkeel.Error;
export { ErrorClass as Error };

export default ctxkeel;
