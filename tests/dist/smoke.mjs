// The installed tarball through ESM: named and default exports are the CommonJS module's.
import assert from 'node:assert/strict';
import ck, { Compactor, estimateTokens, replay } from 'ctxkeel';

assert.equal(typeof Compactor, 'function');
assert.equal(ck.replay, replay);
assert.ok(estimateTokens('hello world') > 0);
console.log('dist npm (import): 3 passed, 0 failed');
