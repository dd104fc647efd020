'use strict';
// ctxkeel/langchain: compactionMiddleware(compactor, options) for LangChain.js v1
// `createAgent({ middleware: [...] })`, and preModelHook(compactor, options) for LangGraph.js
// `createReactAgent({ preModelHook })`. Before every model call the messages are compacted
// and the model is handed the view; the graph state is not touched, so it keeps the full
// history. The messages go to the core as their toDict() form ({type, data}, the 'langchain'
// dialect) and come back as message objects: the state's own objects where the view left
// them unchanged, new ones of LangChain's classes for the checkpoint, stubs and edited
// copies. This module loads without LangChain; each adapter loads what it needs when made.

const { checkCompactor, checkOptions, callOptions, framework } = require('./common.js');

/** A LangChain message (or an already serialized dict) as the core's langchain dialect
 * reads it. */
function toDict(message) {
  if (message !== null && typeof message === 'object' && typeof message.toDict === 'function') {
    return message.toDict();
  }
  return message;
}

/** A list of messages as dicts for the core, and the way back: a view's dict that is one of
 * these is its original message object, any other a new message built from it. */
class Converted {
  constructor(messages, adapter) {
    this.adapter = adapter;
    this.dicts = messages.map(toDict);
    this.origin = new Map(this.dicts.map((d, i) => [d, messages[i]]));
    this.original = (dict) => this.origin.get(dict) ?? null;
  }

  back(view) {
    let stored = null;
    return view.map((dict) => {
      const message = this.origin.get(dict);
      if (message !== undefined) return message;
      if (stored === null) {
        stored = framework('@langchain/core/messages', '@langchain/core', this.adapter)
          .mapStoredMessageToChatMessage;
      }
      return stored(dict);
    });
  }
}

/** A LangChain chat model (an object with invoke and no summarize method) as a summarizer
 * function: it is asked for the checkpoint, and its reply's text is the checkpoint. */
function chatModelSummarizer(options) {
  const summarize = options && options.summarize;
  if (summarize === null || typeof summarize !== 'object' ||
      typeof summarize.summarize === 'function' || typeof summarize.invoke !== 'function') {
    return options;
  }
  const model = summarize;
  return {
    ...options,
    summarize: async (request, { signal }) => {
      const reply = await model.invoke(
        [['system', request.system], ['human', request.prompt]], { signal },
      );
      return replyText(reply);
    },
  };
}

/** The text of a chat model's reply: its `text`, else the text items of its content. */
function replyText(reply) {
  if (reply !== null && typeof reply === 'object') {
    if (typeof reply.text === 'string') return reply.text;
    const { content } = reply;
    if (typeof content === 'string') return content;
    if (Array.isArray(content)) {
      return content.map((item) => (typeof item === 'string' ? item : item?.text ?? '')).join('');
    }
  }
  return reply; // the compactor records anything else as a fallback
}

function messageType(message) {
  return typeof message?._getType === 'function' ? message._getType() : message?.type;
}

/**
 * A LangChain v1 middleware (createMiddleware with wrapModelCall) that compacts what the
 * model sees on every model call of createAgent's loop. The request's system message leads
 * the compacted list (pinned) when it has text; the request's tools count against the window
 * as OpenAI tool schemas unless `options.tools` is given. `middleware.lastResult` is the
 * CompactionResult of the latest call.
 */
function compactionMiddleware(compactor, options) {
  checkCompactor(compactor, 'compactionMiddleware', 'langchain');
  const perCall = checkOptions(chatModelSummarizer(options), 'compactionMiddleware');
  const { createMiddleware } = framework('langchain', 'langchain', 'compactionMiddleware');
  const { convertToOpenAITool } = framework('@langchain/core/utils/function_calling',
    '@langchain/core', 'compactionMiddleware');
  let seen = [];
  let schemas = [];
  const schemasOf = (tools) => {
    if (tools.length !== seen.length || tools.some((t, i) => t !== seen[i])) {
      schemas = tools.map((tool) => {
        try {
          return convertToOpenAITool(tool);
        } catch (err) {
          if (tool !== null && typeof tool === 'object') return tool; // a provider's own tool
          throw err;
        }
      });
      seen = [...tools];
    }
    return schemas;
  };
  const middleware = createMiddleware({
    name: 'CtxkeelCompactionMiddleware',
    wrapModelCall: async (request, handler) => {
      const system = request.systemMessage;
      const pinned = system != null && system.text !== '';
      const converted = new Converted(
        pinned ? [system, ...request.messages] : [...request.messages], 'compactionMiddleware',
      );
      const tools = schemasOf(request.tools ?? []);
      const result = await compactor.compact(converted.dicts, callOptions(
        perCall, { tools: tools.length > 0 ? tools : null }, converted.original,
      ));
      middleware.lastResult = result;
      let view = converted.back(result.messages);
      const changes = {};
      if (pinned && view.length > 0 && messageType(view[0]) === 'system') {
        // The system message is pinned, so it leads the view; it goes back where the
        // request keeps it (the same object unless the core edited it).
        if (view[0] !== system) changes.systemMessage = view[0];
        view = view.slice(1);
      }
      return handler({ ...request, ...changes, messages: view });
    },
  });
  middleware.lastResult = null;
  return middleware;
}

/**
 * A pre-model hook for LangGraph.js createReactAgent: compacts the state's messages and
 * returns { llmInputMessages }, which the model is given instead; the state keeps the full
 * history. The agent's `prompt` is added after the hook and is not counted. `hook.lastResult`
 * is the CompactionResult of the latest call.
 */
function preModelHook(compactor, options) {
  checkCompactor(compactor, 'preModelHook', 'langchain');
  const perCall = checkOptions(chatModelSummarizer(options), 'preModelHook');
  async function hook(state) {
    const messages = state?.messages;
    if (!Array.isArray(messages)) {
      throw new TypeError('ctxkeel: preModelHook needs a state with a messages array');
    }
    const converted = new Converted(messages, 'preModelHook');
    const result = await compactor.compact(
      converted.dicts, callOptions(perCall, {}, converted.original),
    );
    hook.lastResult = result;
    return { llmInputMessages: converted.back(result.messages) };
  }
  hook.lastResult = null;
  return hook;
}

module.exports = { compactionMiddleware, preModelHook, toDict };
