'use strict';
// ctxkeel/ai-sdk: compactStep(compactor, options) for the AI SDK's generateText / streamText
// `prepareStep`. Every step's `messages` (ModelMessage, the core's 'ai-sdk' dialect) are
// compacted and the step is sent the view; the SDK's own steps and response messages keep
// the full history. Messages the view leaves unchanged are the SDK's own objects. The `system`
// option of generateText is not shown to prepareStep: put the system prompt in `messages`
// (role 'system') for it to count, or leave room for it. Needs no package of the SDK.

const { checkCompactor, checkOptions, callOptions } = require('./common.js');

/**
 * A prepareStep function: ({ messages }) => Promise<{ messages }>. `options` are compact()'s
 * (summarize, tools: the JSON schemas sent, to count them, signal). `step.lastResult` is the
 * CompactionResult of the latest step.
 */
function compactStep(compactor, options) {
  checkCompactor(compactor, 'compactStep', 'ai-sdk');
  const perCall = checkOptions(options, 'compactStep');
  async function step({ messages }) {
    if (!Array.isArray(messages)) {
      throw new TypeError('ctxkeel: compactStep: prepareStep was not given a messages array');
    }
    const result = await compactor.compact(messages, callOptions(perCall, {}));
    step.lastResult = result;
    return { messages: result.messages };
  }
  step.lastResult = null;
  return step;
}

module.exports = { compactStep };
