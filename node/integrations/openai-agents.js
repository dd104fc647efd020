'use strict';
// ctxkeel/openai-agents: callModelInputFilter(compactor, options) for the OpenAI Agents SDK's
// `run(agent, input, { callModelInputFilter })` (or the Runner's config). Before every model
// call the SDK's input items are compacted in the core's 'responses' dialect, which reads and
// writes the SDK's own items (callId, function_call_result, reasoning content), and the model
// is given the view; the run keeps the full history. Unchanged items are the SDK's own
// objects, a compacted result a copy of the SDK's item with a new output, a stub or a
// checkpoint a new SDK item. The instructions count against the window (as a system message
// in front) and are returned as they were. Needs no package of the SDK.

const { checkCompactor, checkOptions, callOptions } = require('./common.js');

/**
 * A callModelInputFilter: ({ modelData: { input, instructions } }) => Promise<ModelInputData>.
 * It never changes the SDK's items, so it asks the SDK for them as they are
 * (preserveInputIdentity). `options` are compact()'s (summarize, tools: the schemas sent,
 * to count them, signal). `filter.lastResult` is the CompactionResult of the latest call.
 */
function callModelInputFilter(compactor, options) {
  checkCompactor(compactor, 'callModelInputFilter', 'responses');
  const perCall = checkOptions(options, 'callModelInputFilter');
  async function filter({ modelData }) {
    const { input, instructions } = modelData ?? {};
    if (!Array.isArray(input)) {
      throw new TypeError('ctxkeel: callModelInputFilter was not given modelData.input as an array');
    }
    let items = input;
    let system = null;
    if (typeof instructions === 'string' && instructions !== '') {
      system = { type: 'message', role: 'system', content: instructions };
      items = [system, ...input];
    }
    const result = await compactor.compact(items, callOptions(perCall, {}));
    filter.lastResult = result;
    let view = result.messages;
    let kept = instructions;
    if (system !== null && view.length > 0 && view[0]?.role === 'system') {
      // Pinned, so it leads the view: back into the instructions it came from.
      if (view[0] !== system && typeof view[0].content === 'string') kept = view[0].content;
      view = view.slice(1);
    }
    const out = { input: view };
    if (kept !== undefined) out.instructions = kept;
    return out;
  }
  filter.preserveInputIdentity = true;
  filter.lastResult = null;
  return filter;
}

module.exports = { callModelInputFilter };
