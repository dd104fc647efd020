'use strict';
// ctxkeel/openai-agents: callModelInputFilter(compactor, options) for the OpenAI Agents SDK's
// `run(agent, input, { callModelInputFilter })` (or the Runner's config). Before every model
// call the SDK's input items are compacted in the core's 'responses' dialect and the model is
// given the view; the run keeps the full history. The SDK's items are its own protocol
// (camelCase callId, function_call_result with a structured output, reasoning with
// `content`), so each is shown to the core as the Responses item it stands for and the view
// is turned back: unchanged items are the SDK's own objects, a compacted result is a copy of
// the SDK's item with a new output, a stub or a checkpoint a new SDK item. Reasoning items stay
// with the call they led to and items keep their ids. The instructions count against the
// window (as a system message in front) and are returned as they were. Needs no package of
// the SDK.

const { checkCompactor, checkOptions, callOptions } = require('./common.js');

/** An SDK function_call_result's output as a Responses output: its text, or a list of
 * input_text items with the SDK's other parts (images, files) as they are. */
function outputOf(output) {
  if (typeof output === 'string') return output;
  const parts = Array.isArray(output) ? output : [output];
  if (parts.length === 1 && parts[0]?.type === 'text') return parts[0].text;
  return parts.map((p) => (p?.type === 'text' ? { type: 'input_text', text: p.text } : p));
}

/** The way back: a Responses output list's input_text items as the SDK's text parts. */
function sdkOutput(output) {
  if (!Array.isArray(output)) return output;
  return output.map((p) => (p?.type === 'input_text' ? { type: 'text', text: p.text } : p));
}

// The SDK's results of other calls, by the Responses type the core reads (..._output: no cut
// falls between them and their call).
const RESULT_TYPES = { computer_call_result: 'computer_call_output' };

/** The Responses item an SDK item stands for (the item itself where the two agree). */
function responsesItem(item) {
  if (item === null || typeof item !== 'object') return item;
  switch (item.type) {
    case 'function_call': {
      const out = { type: 'function_call', call_id: item.callId, name: item.name,
        arguments: item.arguments };
      if (item.id !== undefined) out.id = item.id;
      return out;
    }
    case 'function_call_result':
      return { type: 'function_call_output', call_id: item.callId, output: outputOf(item.output) };
    case 'reasoning': {
      const texts = [...(item.content ?? []), ...(item.rawContent ?? [])];
      const out = { type: 'reasoning',
        summary: texts.map((c) => ({ type: 'summary_text', text: String(c?.text ?? '') })) };
      if (item.id !== undefined) out.id = item.id;
      return out;
    }
    default:
      return RESULT_TYPES[item.type] ? { ...item, type: RESULT_TYPES[item.type] } : item;
  }
}

/** The SDK items of one call as Responses items, and the view turned back into SDK items. */
class Converted {
  constructor(items) {
    this.items = items.map(responsesItem);
    this.origin = new Map(this.items.map((d, i) => [d, items[i]]));
    this.byCallId = new Map(); // call id -> {call, result}: the SDK's own items
    for (const item of items) {
      if (item?.type === 'function_call' || item?.type === 'function_call_result') {
        const entry = this.byCallId.get(item.callId) ?? {};
        entry[item.type === 'function_call' ? 'call' : 'result'] = item;
        this.byCallId.set(item.callId, entry);
      }
    }
    this.original = (d) => this.origin.get(d) ?? null;
  }

  back(d) {
    const own = this.origin.get(d);
    if (own !== undefined) return own;
    const entry = this.byCallId.get(d?.call_id) ?? {};
    if (d?.type === 'function_call_output') {
      // A result the core rewrote (an offloaded output), or a stub for a call left without one.
      const base = entry.result ?? { type: 'function_call_result', callId: d.call_id,
        name: entry.call?.name ?? '', status: 'completed' };
      return { ...base, output: sdkOutput(d.output) };
    }
    if (d?.type === 'function_call' && entry.call) return { ...entry.call, arguments: d.arguments };
    return d; // a message item (the checkpoint, an edited copy) is the SDK's own shape
  }
}

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
    const converted = new Converted(input);
    const items = converted.items;
    let system = null;
    if (typeof instructions === 'string' && instructions !== '') {
      system = { type: 'message', role: 'system', content: instructions };
      items.unshift(system);
    }
    const result = await compactor.compact(items, callOptions(perCall, {}, converted.original));
    filter.lastResult = result;
    let view = result.messages;
    let kept = instructions;
    if (system !== null && view.length > 0 && view[0]?.role === 'system') {
      // Pinned, so it leads the view: back into the instructions it came from.
      if (view[0] !== system && typeof view[0].content === 'string') kept = view[0].content;
      view = view.slice(1);
    }
    const out = { input: view.map((d) => converted.back(d)) };
    if (kept !== undefined) out.instructions = kept;
    return out;
  }
  filter.preserveInputIdentity = true;
  filter.lastResult = null;
  return filter;
}

module.exports = { callModelInputFilter, Converted };
