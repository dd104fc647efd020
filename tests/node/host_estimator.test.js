'use strict';

// A host token counter as the estimator: estimateTokens(x, {estimator: fn}), and what happens
// when it throws or answers badly.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers.js');

const { ctxkeel } = h;
const { estimateTokens } = ctxkeel;

const MESSAGE_OVERHEAD = 4;
const REQUEST_OVERHEAD = 3;
const IMAGE_TOKENS = 765;

/** A counter that records every text it is asked about: one token per 4 UTF-16 units. */
function recordingCounter() {
  const texts = [];
  const fn = (text) => {
    texts.push(text);
    return Math.ceil(text.length / 4);
  };
  fn.texts = texts;
  return fn;
}

describe('estimateTokens with a counting function', () => {
  it('counts a string with one call on the string itself', () => {
    const fn = recordingCounter();
    assert.equal(estimateTokens('hello, world', { estimator: fn }), 3);
    assert.deepEqual(fn.texts, ['hello, world']);
  });

  it('counts a message as its strings joined, plus the overhead and images', () => {
    const fn = recordingCounter();
    const message = { role: 'user', content: [h.text('look at this'),
      { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }, h.text('and this')] };
    assert.equal(estimateTokens(message, { estimator: fn }),
      Math.ceil('look at this\nand this'.length / 4) + IMAGE_TOKENS + MESSAGE_OVERHEAD);
    assert.deepEqual(fn.texts, ['look at this\nand this']);
  });

  it('counts a list message by message, plus the request overhead', () => {
    const fn = recordingCounter();
    const list = [h.sys('be brief'), h.user('what is 2 + 2?'), h.asst(h.call('c1', 'calc')),
      h.tool('c1', '4')];
    const each = list.map((m) => estimateTokens(m, { estimator: fn }));
    fn.texts.length = 0;
    assert.equal(estimateTokens(list, { estimator: fn }),
      each.reduce((a, b) => a + b, 0) + REQUEST_OVERHEAD);
    assert.equal(fn.texts.length, list.length);
    assert.equal(estimateTokens([], { estimator: fn }), 0);
    assert.equal(fn.texts.length, list.length, 'an empty list called the counter');
  });

  it('counts a tool list as its JSON text', () => {
    const fn = recordingCounter();
    const tools = [{ type: 'function', function: { name: 'bash', parameters: { type: 'object' } } }];
    assert.equal(estimateTokens(tools, { estimator: fn }), Math.ceil(JSON.stringify(tools).length / 4));
    assert.deepEqual(fn.texts, [JSON.stringify(tools)]);
  });

  it('passes on what the counter throws, and refuses bad answers', () => {
    const thrown = new Error('tokenizer crashed');
    const raising = () => {
      throw thrown;
    };
    assert.throws(() => estimateTokens('x', { estimator: raising }), (err) => err === thrown);
    assert.throws(() => estimateTokens([h.user('a'), h.user('b')], { estimator: raising }),
      (err) => err === thrown);
    const BAD = [
      [-1, RangeError, /must return an integer from 0/],
      [2.5, RangeError, /must return an integer from 0/],
      [NaN, RangeError, /must return an integer from 0/],
      ['3', TypeError, /must return a number of tokens, not a string/],
      [null, TypeError, /must return a number of tokens, not null/],
      [Promise.resolve(3), TypeError, /returned a Promise; a token counter must answer synchron/],
    ];
    for (const [answer, ErrorClass, message] of BAD) {
      assert.throws(() => estimateTokens(h.user('hi'), { estimator: () => answer }),
        (err) => err instanceof ErrorClass && message.test(err.message), String(answer));
    }
    assert.throws(() => estimateTokens('x', { estimator: async () => 1 }),
      { name: 'TypeError', message: /async function/ });
  });
});
