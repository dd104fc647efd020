'use strict';

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { ctxkeel } = require('./helpers.js');

const KEYS = [
  'user_intent',
  'execution_progress',
  'key_decisions',
  'tried_solutions',
  'next_steps',
];
const NONE = Object.fromEntries(KEYS.map((k) => [k, null]));

describe('parseAnchors', () => {
  it('reads Markdown sections into the five anchors and the summary', () => {
    const reply = [
      'Here is the checkpoint you asked for.',
      '## User Intent',
      'Fix the login bug in auth.py',
      '',
      '### execution progress:',
      '- found the cause',
      '**Key Decision**',
      'Use JWT.',
      '## Tried Solutions',
      '- N/A',
      '## Next Steps',
      '1. write tests',
      '## Summary',
      'We are halfway.',
    ].join('\n');
    const { anchors, summary } = ctxkeel.parseAnchors(reply);
    assert.deepEqual(Object.keys(anchors), KEYS);
    assert.deepEqual(anchors, {
      user_intent: 'Fix the login bug in auth.py',
      execution_progress: '- found the cause',
      key_decisions: 'Use JWT.',
      tried_solutions: null,
      next_steps: '1. write tests',
    });
    assert.equal(summary, 'We are halfway.');
  });

  it('reads fenced JSON', () => {
    const reply = 'Sure:\n```json\n{"user_intent": "ship it", "next_steps": "none", ' +
      '"summary": "short"}\n```\n';
    const { anchors, summary } = ctxkeel.parseAnchors(reply);
    assert.equal(anchors.user_intent, 'ship it');
    assert.equal(anchors.next_steps, null);
    assert.equal(summary, 'short');
  });

  it('never fails on odd text', () => {
    for (const reply of ['', 'just prose', '## \n##', '{"user_intent": ', '\u0000\ud800']) {
      const parsed = ctxkeel.parseAnchors(reply);
      assert.deepEqual(Object.keys(parsed), ['anchors', 'summary']);
      assert.deepEqual(Object.keys(parsed.anchors), KEYS);
      assert.equal(typeof parsed.summary, 'string');
    }
    assert.deepEqual(ctxkeel.parseAnchors('nothing here'), { anchors: NONE, summary: '' });
  });

  it('keeps non-ASCII text intact', () => {
    const { anchors } = ctxkeel.parseAnchors('## User Intent\n修复登录错误 — ✓\n');
    assert.equal(anchors.user_intent, '修复登录错误 — ✓');
  });
});

describe('mergeAnchors', () => {
  const old = {
    user_intent: 'fix login',
    execution_progress: 'found cause',
    key_decisions: 'use JWT',
    tried_solutions: 'restart',
    next_steps: 'write tests',
  };

  it('lets N/A in any spelling keep the old value', () => {
    const merged = ctxkeel.mergeAnchors(old, {
      user_intent: '- N/A',
      execution_progress: 'N/A',
      key_decisions: null,
      tried_solutions: 'none',
      // next_steps missing
    });
    assert.deepEqual(merged, old);
    assert.deepEqual(Object.keys(merged), KEYS);
  });

  it('replaces with new values that are not N/A, trimmed', () => {
    const merged = ctxkeel.mergeAnchors(old, {
      next_steps: '  deploy  ',
      key_decisions: 'use OAuth',
    });
    assert.equal(merged.next_steps, 'deploy');
    assert.equal(merged.key_decisions, 'use OAuth');
    assert.equal(merged.user_intent, 'fix login');
  });

  it('treats null, undefined and empty objects as all N/A', () => {
    assert.deepEqual(ctxkeel.mergeAnchors(null, undefined), NONE);
    assert.deepEqual(ctxkeel.mergeAnchors({}, old), old);
    assert.deepEqual(ctxkeel.mergeAnchors(old, {}), old);
    assert.deepEqual(ctxkeel.mergeAnchors(undefined, { user_intent: 'N/A' }), NONE);
    assert.deepEqual(ctxkeel.mergeAnchors({ user_intent: '- N/A' }, null), NONE);
  });

  it('accepts parseAnchors output and ignores unknown keys', () => {
    const { anchors } = ctxkeel.parseAnchors('## Next Steps\nrun CI\n## Key Decisions\n- N/A');
    const merged = ctxkeel.mergeAnchors({ ...old, extra: 1 }, anchors);
    assert.deepEqual(merged, { ...old, next_steps: 'run CI' });
  });

  it('rejects anchor values that are not strings, naming the key', () => {
    assert.throws(() => ctxkeel.mergeAnchors({ key_decisions: 5 }, {}), (err) => {
      assert.equal(err.code, 'CK_ETYPE');
      assert.equal(err.where, 'old.key_decisions');
      assert.equal(err.message, 'ctxkeel: old.key_decisions: expected a string or null');
      assert.ok(err instanceof ctxkeel.InputError);
      return true;
    });
    assert.throws(() => ctxkeel.mergeAnchors({}, { next_steps: ['a'] }),
      { code: 'CK_ETYPE', where: 'new.next_steps' });
  });
});
