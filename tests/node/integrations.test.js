'use strict';
// ctxkeel/ai-sdk, ctxkeel/langchain and ctxkeel/openai-agents, each in its framework's own
// agent loop: 32 model calls against the framework's own fake model (the Agents SDK: a Model
// of ours), 20 KB tool outputs (one of 120 KB, which only the emergency tier fits), 3 KB of
// the model's own text per call and a small window, so that compaction happens again and
// again. Each test checks what the model was given on every call (within the window by the
// compactor's own estimate, no pairing violation, the task there verbatim), that the
// framework's state still holds the whole history, that the summarizer was called through
// the adapter and that the compactions were recorded. The last test installs the package as
// a copy, from its npm pack tarball, and loads every subpath.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const repoRoot = path.resolve(__dirname, '..', '..');
const ctxkeel = require(path.join(repoRoot, 'node', 'index.js'));
const { compactStep } = require(path.join(repoRoot, 'node', 'integrations', 'ai-sdk.js'));

const WINDOW = 24000;
const CALLS = 32; // model calls per loop: 31 tool calls, then the answer
const BIG_STEP = 20; // the step whose output is 120 KB
const TASK = 'Find the step whose log reports the checksum mismatch and explain it.';
const SYSTEM = 'You are a careful log reader.';
const ANSWER = 'Step 7 reports the mismatch.';

/** The output of readLog(step): 20 KB of distinct lines (120 KB at BIG_STEP). */
function logText(step) {
  const size = step === BIG_STEP ? 120000 : 20000;
  const lines = [];
  let length = 0;
  for (let n = 0; length < size; n += 1) {
    const line = `step ${step} line ${n}: worker=${n % 7} state=ok bytes=${n * 31}`;
    lines.push(line);
    length += line.length + 1;
  }
  return lines.join('\n');
}

/** What the model writes with each call: 3 KB that offloading cannot shrink, so that the
 * history must be folded into a checkpoint too. */
function notes(step) {
  const parts = [];
  for (let k = 0; k < 48; k += 1) {
    parts.push(`Step ${step}: the counters look plausible, checking worker ${k} next.`);
  }
  return parts.join(' ');
}

function checkpointReply(request) {
  return '## User Intent\nFind the checksum mismatch.\n\n' +
    `## Execution Progress\nRead ${request.messages.length} messages (tier ${request.tier}).\n\n` +
    '## Key Decisions\nRead every log in order.\n\n## Tried Solutions\nN/A\n\n' +
    '## Next Steps\nRead the next log.\n';
}

/** A summarizer that counts its calls, keeps each request's span and writes a checkpoint. */
function summaries() {
  const s = async (request) => {
    s.calls += 1;
    assert.ok(request.prompt && request.messages.length > 0);
    s.spans.push(request.messages);
    await new Promise((resolve) => setImmediate(resolve));
    return checkpointReply(request);
  };
  s.calls = 0;
  s.spans = [];
  return s;
}

const storeDirs = [];
test.after(() => {
  for (const dir of storeDirs) fs.rmSync(dir, { recursive: true, force: true });
});

function compactorFor(records, options = {}) {
  const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ctxkeel-int-'));
  storeDirs.push(storeDir);
  return new ctxkeel.Compactor({
    contextWindow: WINDOW, storeDir, onCompaction: (r) => records.push(r), ...options,
  });
}

/** What one model call was given, as the core reads it: within the window, validly paired,
 * the task there verbatim. Returns its tokens. */
function checkView(view, format, textOf) {
  const tokens = ctxkeel.estimateTokens(view);
  assert.ok(tokens <= WINDOW, `the model was given ${tokens} tokens`);
  assert.deepEqual(ctxkeel.checkPairs(view, { format }), []);
  assert.ok(view.some((m) => textOf(m) === TASK), 'the task is not in the view verbatim');
  return tokens;
}

function checkRecords(records, summarize) {
  assert.ok(summarize.calls >= 1, 'the summarizer was not called');
  const tiers = new Set(records.map((r) => r.tier));
  for (const tier of ['soft', 'full', 'emergency']) {
    assert.ok(tiers.has(tier), `no ${tier} compaction in ${[...tiers]}`);
  }
  assert.ok(records.every((r) => !r.fallback), 'a summary fell back');
}

// ---- AI SDK generateText / streamText -------------------------------------------------------

function aiScript(received) {
  const { MockLanguageModelV3 } = require('ai/test');
  const usage = {
    inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 10, text: 10, reasoning: 0 },
  };
  const content = (step) => (step < CALLS
    ? [{ type: 'text', text: notes(step) },
      { type: 'tool-call', toolCallId: `call_${step}`, toolName: 'readLog',
        input: JSON.stringify({ step }) }]
    : [{ type: 'text', text: ANSWER }]);
  const finish = (step) => ({ unified: step < CALLS ? 'tool-calls' : 'stop', raw: undefined });
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      received.push(prompt);
      const step = received.length;
      return { content: content(step), finishReason: finish(step), usage, warnings: [] };
    },
    doStream: async ({ prompt }) => {
      received.push(prompt);
      const step = received.length;
      const parts = [{ type: 'stream-start', warnings: [] }];
      for (const part of content(step)) {
        if (part.type === 'text') {
          parts.push({ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: part.text },
            { type: 'text-end', id: 't' });
        } else {
          parts.push(part);
        }
      }
      parts.push({ type: 'finish', finishReason: finish(step), usage });
      const { simulateReadableStream } = require('ai');
      return { stream: simulateReadableStream({ chunks: parts }) };
    },
  });
}

for (const mode of ['generateText', 'streamText']) {
  test(`ai-sdk: compactStep in ${mode}'s loop`, async () => {
    const ai = require('ai');
    const { z } = require('zod');
    const records = [];
    const received = [];
    const seen = []; // the messages prepareStep was given, with the view it returned
    const compactor = compactorFor(records);
    const summarize = summaries();
    const prepare = compactStep(compactor, { summarize });
    const options = {
      model: aiScript(received),
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: TASK }],
      allowSystemInMessages: true,
      tools: {
        readLog: ai.tool({
          description: 'Returns the log of one step.',
          inputSchema: z.object({ step: z.number() }),
          execute: async ({ step }) => logText(step),
        }),
      },
      stopWhen: ai.stepCountIs(CALLS + 5),
      prepareStep: async (step) => {
        const out = await prepare(step);
        seen.push({ given: step.messages, view: out.messages });
        return out;
      },
    };
    let response;
    if (mode === 'generateText') {
      response = await ai.generateText(options);
    } else {
      const stream = ai.streamText({ ...options, onError: ({ error }) => { throw error; } });
      await stream.consumeStream();
      response = { text: await stream.text, steps: await stream.steps, response: await stream.response };
    }
    assert.equal(received.length, CALLS);
    assert.equal(response.text, ANSWER);
    const textOf = (m) => (typeof m.content === 'string' ? m.content
      : m.content.filter((p) => p.type === 'text').map((p) => p.text).join(''));
    let compacted = 0;
    for (const { given, view } of seen) {
      checkView(view, 'ai-sdk', textOf);
      assert.equal(view[1], given[1], 'the task is not the SDK\'s own message');
      for (const m of view) {
        // An unchanged message is the SDK's own object; any other is not one of its messages.
        const same = given.filter((g) => JSON.stringify(g) === JSON.stringify(m));
        if (same.length > 0) assert.ok(same.includes(m));
      }
      compacted += view.length < given.length ? 1 : 0;
    }
    assert.ok(compacted >= CALLS / 2, `${compacted} compacted steps`);
    // What the mock model was sent is the view: the system prompt and the task, verbatim.
    for (const prompt of received) {
      assert.deepEqual(prompt[0], { role: 'system', content: SYSTEM, providerOptions: undefined });
      assert.equal(prompt[1].content[0].text, TASK);
    }
    // The SDK keeps the whole history: every call's full output.
    const outputs = response.response.messages.filter((m) => m.role === 'tool')
      .flatMap((m) => m.content).map((p) => p.output.value);
    assert.deepEqual(outputs, Array.from({ length: CALLS - 1 }, (_, k) => logText(k + 1)));
    checkRecords(records, summarize);
    assert.ok(prepare.lastResult !== null);
  });
}

// ---- LangChain.js createAgent and LangGraph.js createReactAgent -----------------------------

const langchainAdapter = () => require(path.join(repoRoot, 'node', 'integrations', 'langchain.js'));

/** LangChain's fake list chat model, scripted to call readLog for steps 1..CALLS-1 and then
 * answer; it takes tools (and answers from its script anyway) and records every input. */
function scriptedChat(prefix, received) {
  const { FakeListChatModel } = require('@langchain/core/utils/testing');
  const { AIMessage } = require('@langchain/core/messages');
  class ScriptedChat extends FakeListChatModel {
    bindTools() {
      return this;
    }

    async _generate(messages) {
      received.push(messages);
      const step = received.length;
      const message = step < CALLS
        ? new AIMessage({
          content: notes(step),
          tool_calls: [{ name: 'readLog', args: { step }, id: `${prefix}${step}`, type: 'tool_call' }],
        })
        : new AIMessage(ANSWER);
      return { generations: [{ message, text: typeof message.content === 'string' ? message.content : '' }] };
    }
  }
  return new ScriptedChat({ responses: [ANSWER] });
}

function readLogTool() {
  const { tool } = require('@langchain/core/tools');
  const { z } = require('zod');
  return tool(async ({ step }) => logText(step), {
    name: 'readLog', description: 'Returns the log of one step.', schema: z.object({ step: z.number() }),
  });
}

const lcText = (d) => {
  const content = (d.data ?? d).content;
  return typeof content === 'string' ? content
    : content.map((p) => (typeof p === 'string' ? p : p.text ?? '')).join('');
};

/** Every message of the view that equals one of the history is that very object. */
function checkUnchangedKept(view, history) {
  const { toDict } = langchainAdapter();
  const dumps = history.map((h) => [h, JSON.stringify(toDict(h))]);
  for (const message of view) {
    const text = JSON.stringify(toDict(message));
    const same = dumps.filter(([, d]) => d === text).map(([h]) => h);
    if (same.length > 0) assert.ok(same.includes(message), 'an unchanged message was copied');
  }
}

function checkFullHistory(messages) {
  const { ToolMessage } = require('@langchain/core/messages');
  assert.equal(messages.length, 1 + 2 * (CALLS - 1) + 1);
  assert.deepEqual(messages.filter((m) => ToolMessage.isInstance(m)).map((m) => m.content),
    Array.from({ length: CALLS - 1 }, (_, k) => logText(k + 1)));
}

test('langchain: compactionMiddleware in createAgent\'s loop', async () => {
  const { createAgent, createMiddleware } = require('langchain');
  const { HumanMessage } = require('@langchain/core/messages');
  const { compactionMiddleware, toDict } = langchainAdapter();
  const records = [];
  const requests = [];
  const received = [];
  const summarize = summaries();
  const middleware = compactionMiddleware(compactorFor(records), { summarize });
  const seen = createMiddleware({
    name: 'Seen',
    wrapModelCall: (request, handler) => {
      requests.push({ request, history: [...request.state.messages] });
      return handler(request);
    },
  });
  const agent = createAgent({
    model: scriptedChat('lc', received), tools: [readLogTool()], systemPrompt: SYSTEM,
    middleware: [middleware, seen],
  });
  const state = await agent.invoke({ messages: [new HumanMessage(TASK)] },
    { recursionLimit: 4 * CALLS });
  assert.equal(requests.length, CALLS);
  assert.equal(received.length, CALLS);
  const { convertToOpenAITool } = require('@langchain/core/utils/function_calling');
  const toolTokens = ctxkeel.estimateTokens([convertToOpenAITool(readLogTool())]);
  let compacted = 0;
  for (const [k, { request, history }] of requests.entries()) {
    const given = [request.systemMessage, ...request.messages].map(toDict);
    const tokens = checkView(given, 'langchain', lcText);
    assert.ok(tokens + toolTokens <= WINDOW, `${tokens} + ${toolTokens} tool tokens`);
    assert.equal(request.systemMessage.text, SYSTEM);
    assert.equal(request.messages[0], history[0], 'the task is not the state\'s own object');
    checkUnchangedKept(request.messages, history);
    compacted += request.messages.length < history.length ? 1 : 0;
    // What the model was given is that request: the system message, then its messages.
    assert.deepEqual(received[k].map(toDict), given);
  }
  assert.ok(compacted >= CALLS / 2, `${compacted} compacted calls`);
  checkFullHistory(state.messages);
  checkRecords(records, summarize);
  // The summarizer is shown the span as the state's own message objects.
  const known = new Set([...state.messages, ...requests.map((r) => r.request.systemMessage)]);
  assert.ok(summarize.spans.every((span) => span.every((m) => known.has(m))));
  assert.ok(middleware.lastResult !== null);
});

test('langchain: a chat model as compactionMiddleware\'s summarizer', async () => {
  const { createAgent } = require('langchain');
  const { HumanMessage } = require('@langchain/core/messages');
  const { FakeListChatModel } = require('@langchain/core/utils/testing');
  const { compactionMiddleware } = langchainAdapter();
  const records = [];
  const received = [];
  const reply = checkpointReply({ messages: [1], tier: 'full' })
    .replace('Read every log in order.', 'Written by the chat model.');
  const asked = [];
  class Summarizer extends FakeListChatModel {
    async _generate(messages, options, runManager) {
      asked.push(messages);
      return super._generate(messages, options, runManager);
    }
  }
  const agent = createAgent({
    model: scriptedChat('cm', received), tools: [readLogTool()],
    middleware: [compactionMiddleware(compactorFor(records),
      { summarize: new Summarizer({ responses: [reply] }) })],
  });
  await agent.invoke({ messages: [new HumanMessage(TASK)] }, { recursionLimit: 4 * CALLS });
  const summarized = records.filter((r) => ['soft', 'full'].includes(r.tier) && r.summarized);
  assert.ok(summarized.length > 0 && asked.length >= summarized.length);
  assert.ok(summarized.every((r) => !r.fallback && r.anchors.key_decisions === 'Written by the chat model.'));
  assert.equal(asked[0][0]._getType(), 'system');
  const shown = received.flat().filter((m) => typeof m.content === 'string' &&
    m.content.includes('Written by the chat model.'));
  assert.ok(shown.length > 0, 'the model was never shown the chat model\'s checkpoint');
});

test('langchain: preModelHook in createReactAgent\'s loop', async () => {
  const { createReactAgent } = require('@langchain/langgraph/prebuilt');
  const { HumanMessage } = require('@langchain/core/messages');
  const { preModelHook, toDict } = langchainAdapter();
  const records = [];
  const received = [];
  const summarize = summaries();
  const hook = preModelHook(compactorFor(records), { summarize });
  const agent = createReactAgent({
    llm: scriptedChat('lg', received), tools: [readLogTool()], prompt: SYSTEM, preModelHook: hook,
  });
  const state = await agent.invoke({ messages: [new HumanMessage(TASK)] },
    { recursionLimit: 4 * CALLS });
  assert.equal(received.length, CALLS);
  const sizes = received.map((given) => {
    assert.equal(given[0].content, SYSTEM);
    return checkView(given.map(toDict), 'langchain', lcText);
  });
  assert.ok(Math.max(...sizes) > WINDOW * 0.5, 'the views were never full');
  checkFullHistory(state.messages);
  assert.equal(received[CALLS - 1][1], state.messages[0], 'the task is not the state\'s own object');
  for (const given of received) checkUnchangedKept(given.slice(1), state.messages);
  checkRecords(records, summarize);
  assert.ok(hook.lastResult !== null && hook.lastResult.messages.length < state.messages.length);
});

// ---- OpenAI Agents SDK ----------------------------------------------------------------------

const agentsAdapter = () => require(path.join(repoRoot, 'node', 'integrations', 'openai-agents.js'));

/** A Model of the Agents SDK that calls readLog for steps 1..CALLS-1, each call after a
 * reasoning item, then answers; it records the instructions and input of every call. */
function agentsModel(received) {
  const { Usage } = require('@openai/agents');
  return {
    async getResponse(request) {
      received.push({ instructions: request.systemInstructions, input: request.input });
      const step = received.length;
      const output = step < CALLS
        ? [{ type: 'reasoning', id: `rs_${step}`, content: [{ type: 'input_text', text: notes(step) }] },
          { type: 'function_call', id: `fc_${step}`, callId: `call_${step}`, name: 'readLog',
            arguments: JSON.stringify({ step }), status: 'completed' }]
        : [{ type: 'message', id: 'msg_done', role: 'assistant', status: 'completed',
          content: [{ type: 'output_text', text: ANSWER }] }];
      return { output, usage: new Usage(), responseId: undefined };
    },
    async *getStreamedResponse() {
      throw new Error('not used');
    },
  };
}

/** Every item passes the Agents SDK's own schema of a model input item. */
function checkSdkItems(items) {
  const { protocol } = require('@openai/agents-core');
  for (const [k, item] of items.entries()) {
    const parsed = protocol.ModelItem.safeParse(item);
    assert.ok(parsed.success, `input[${k}] is not an SDK item: ${JSON.stringify(item).slice(0, 300)}`);
  }
}

const responsesText = (d) => (typeof d.content === 'string' ? d.content
  : Array.isArray(d.content) ? d.content.map((p) => p.text ?? '').join('') : undefined);

/** run() of an agent with readLog, through callModelInputFilter with `summarize`. */
async function runAgents(records, summarize) {
  const { Agent, run, tool, setTracingDisabled } = require('@openai/agents');
  const { z } = require('zod');
  setTracingDisabled(true);
  const { callModelInputFilter } = agentsAdapter();
  const received = [];
  const filter = callModelInputFilter(compactorFor(records), { summarize });
  const readLog = tool({
    name: 'readLog', description: 'Returns the log of one step.',
    parameters: z.object({ step: z.number() }), execute: async ({ step }) => logText(step),
  });
  const agent = new Agent({ name: 'reader', instructions: SYSTEM, tools: [readLog],
    model: agentsModel(received) });
  const result = await run(agent, TASK, { callModelInputFilter: filter, maxTurns: CALLS + 5 });
  assert.equal(result.finalOutput, ANSWER);
  assert.equal(received.length, CALLS);
  return { result, received, filter };
}

test('openai-agents: callModelInputFilter in run()\'s loop', async () => {
  const records = [];
  const summarize = summaries();
  const { result, received, filter } = await runAgents(records, summarize);
  let compacted = 0;
  for (const [j, { instructions, input }] of received.entries()) {
    assert.equal(instructions, SYSTEM);
    // The core reads the SDK's own items: the model input is checked as it was sent.
    const view = [{ type: 'message', role: 'system', content: SYSTEM }, ...input];
    checkView(view, 'responses', responsesText);
    // Only the SDK's own item protocol: no Responses API result, no snake_case call id.
    assert.ok(input.every((i) => i.type !== 'function_call_output' && i.call_id === undefined));
    checkSdkItems(input);
    // A reasoning item stays right before the call it led to, ids and all.
    input.forEach((item, k) => {
      if (item.type !== 'reasoning') return;
      assert.equal(input[k + 1].type, 'function_call');
      assert.equal(input[k + 1].id, `fc_${item.id.slice(3)}`);
    });
    // Every result is an SDK item: its callId, its name, a string or structured output.
    for (const item of input.filter((i) => i.type === 'function_call_result')) {
      assert.equal(item.name, 'readLog');
      assert.ok(typeof item.callId === 'string' && item.output !== undefined);
    }
    compacted += input.length < 1 + 3 * j ? 1 : 0; // the task, then reasoning, call, result
  }
  assert.ok(compacted >= CALLS / 2, `${compacted} compacted calls`);
  // The run's own history is whole.
  const outputs = result.history.filter((i) => i.type === 'function_call_result')
    .map((i) => (typeof i.output === 'string' ? i.output : i.output.text));
  assert.deepEqual(outputs, Array.from({ length: CALLS - 1 }, (_, k) => logText(k + 1)));
  checkRecords(records, summarize);
  // The summarizer is shown the SDK's own items.
  assert.ok(summarize.spans.flat().every((item) => item.type !== 'function_call_output'));
  assert.ok(filter.lastResult !== null);
});

test('openai-agents: the filter on its own, as the SDK calls it', async () => {
  const { callModelInputFilter } = agentsAdapter();
  const answer = { type: 'message', id: 'msg_1', role: 'assistant', status: 'completed',
    content: [{ type: 'output_text', text: 'Reading.' }] };
  const items = [{ role: 'user', content: TASK }, answer];
  for (let step = 1; step <= 8; step += 1) {
    items.push({ type: 'function_call', callId: `c${step}`, name: 'readLog',
      arguments: JSON.stringify({ step }), status: 'completed' });
    items.push({ type: 'function_call_result', callId: `c${step}`, name: 'readLog',
      status: 'completed', output: step % 2 ? logText(step) : { type: 'text', text: logText(step) } });
  }
  const before = JSON.stringify(items);
  const filter = callModelInputFilter(compactorFor([]));
  assert.equal(filter.preserveInputIdentity, true);
  const out = await filter({ modelData: { input: [...items] }, agent: null, context: undefined });
  assert.equal(JSON.stringify(items), before, 'the SDK\'s items were changed');
  checkSdkItems(out.input);
  assert.equal(out.instructions, undefined);
  assert.notEqual(filter.lastResult.tier, 'none');
  assert.equal(out.input[0], items[0]);
  assert.equal(out.input[1], answer);
  assert.deepEqual(out.input.slice(2).map((i) => [i.type, i.callId]),
    items.slice(2).map((i) => [i.type, i.callId]));
  const rewritten = out.input.filter((item, k) => item !== items[k]);
  assert.ok(rewritten.length > 0 && rewritten.every((i) => i.type === 'function_call_result' &&
    i.name === 'readLog' && i.status === 'completed' && /read_evidence|offloaded|evidence/i
      .test(typeof i.output === 'string' ? i.output : JSON.stringify(i.output))));
});

test('openai-agents: a stub and an image result come back as SDK items', async () => {
  const { callModelInputFilter } = agentsAdapter();
  const image = { type: 'input_image', image: 'data:image/png;base64,iVBORw0KGgo=' };
  const items = [{ role: 'user', content: TASK },
    { type: 'function_call', callId: 'c1', name: 'screenshot', arguments: '{}', status: 'completed' },
    { type: 'function_call_result', callId: 'c1', name: 'screenshot', status: 'completed',
      output: [{ type: 'input_text', text: logText(BIG_STEP) }, image] },
    { type: 'function_call', callId: 'c2', name: 'readLog', arguments: '{"step":2}', status: 'completed' }];
  const filter = callModelInputFilter(compactorFor([]));
  const out = await filter({ modelData: { input: items, instructions: SYSTEM } });
  checkSdkItems(out.input);
  assert.equal(out.instructions, SYSTEM);
  assert.deepEqual(ctxkeel.checkPairs([{ role: 'system', content: SYSTEM }, ...out.input],
    { format: 'responses' }), []);
  const shot = out.input.find((i) => i.callId === 'c1' && i.type === 'function_call_result');
  assert.notEqual(shot, items[2], 'the long result was not offloaded');
  assert.equal(shot.output.length, 2);
  assert.equal(shot.output[0].type, 'input_text');
  assert.match(shot.output[0].text, /offloaded/);
  assert.equal(shot.output[1], image, 'the SDK\'s own image item is not kept beside the text');
  const stub = out.input.find((i) => i.callId === 'c2' && i.type === 'function_call_result');
  assert.deepEqual(Object.keys(stub).sort(), ['callId', 'name', 'output', 'status', 'type']);
  assert.equal(stub.name, 'readLog');
  assert.equal(stub.status, 'completed');
  assert.equal(stub.output.type, 'text');
  assert.equal(typeof stub.output.text, 'string');
});

test('adapters check what they are given', () => {
  const { compactionMiddleware, preModelHook } = langchainAdapter();
  const { callModelInputFilter } = agentsAdapter();
  const compactor = compactorFor([]);
  assert.throws(() => compactStep(compactor, { keepTail: 3 }), /unknown option\(s\) keepTail/);
  assert.throws(() => compactStep({}), /takes a ctxkeel Compactor/);
  assert.throws(() => preModelHook(compactor, { summarize: 'a model name' }), /summarize must be/);
  assert.throws(() => compactionMiddleware(compactor, { tools: {} }), /tools must be an array/);
  assert.throws(() => preModelHook(compactorFor([], { format: 'openai' })), /format 'openai'/);
  assert.throws(() => callModelInputFilter(compactorFor([], { format: 'langchain' })), /responses/);
  assert.throws(() => compactStep(compactorFor([], { format: 'responses' })), /'ai-sdk'/);
  callModelInputFilter(compactorFor([], { format: 'responses' }));
});

// ---- the built-in HTTP summarizer through an adapter ---------------------------------------

test('openai-agents: an HttpSummarizer as summarize', async () => {
  const http = require('node:http');
  const NEXT = 'Read the log of step 33 and compare its checksum.';
  const asked = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      asked.push({ url: req.url, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      const text = checkpointReply({ messages: [1], tier: 'full' }).replace('Read the next log.', NEXT);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'c1', object: 'chat.completion', model: 'cheap',
        choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.env.CTXKEEL_TEST_INT_KEY = 'sk-test';
  const summarizer = new ctxkeel.HttpSummarizer({
    baseUrl: `http://127.0.0.1:${server.address().port}/v1`, model: 'cheap',
    apiKeyEnv: 'CTXKEEL_TEST_INT_KEY',
  });
  try {
    const records = [];
    await runAgents(records, summarizer);
    const summarized = records.filter((r) => ['soft', 'full'].includes(r.tier) && r.summarized);
    assert.ok(summarized.length > 0 && asked.length >= summarized.length);
    assert.ok(asked.every((a) => a.url === '/v1/chat/completions' && a.body.model === 'cheap'));
    assert.ok(summarized.every((r) => !r.fallback && r.anchors.next_steps === NEXT));
  } finally {
    summarizer.close();
    server.close();
    delete process.env.CTXKEEL_TEST_INT_KEY;
  }
});

// ---- the package as installed from its tarball ----------------------------------------------

test('every subpath loads from an installed copy of the package, without the frameworks', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ctxkeel-pack-'));
  try {
    const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', dir],
      { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }))[0];
    for (const name of ['ai-sdk', 'langchain', 'openai-agents']) {
      for (const ext of ['js', 'mjs', 'd.ts', 'd.mts']) {
        assert.ok(packed.files.some((f) => f.path === `node/integrations/${name}.${ext}`),
          `node/integrations/${name}.${ext} is not in the package`);
      }
    }
    const app = path.join(dir, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), '{"name":"app","private":true}');
    // Offline, from the local tarball; the install script (which would build the addon) is
    // skipped and, unless the tarball ships a prebuilt addon, the one built here is put where
    // a prebuilt one ships.
    execFileSync('npm', ['install', '--offline', '--ignore-scripts', '--no-audit', '--no-fund',
      path.join(dir, packed.filename)], { cwd: app, stdio: ['ignore', 'pipe', 'pipe'] });
    const installed = path.join(app, 'node_modules', 'ctxkeel');
    const prebuilt = path.join(installed, 'prebuilds', `${process.platform}-${process.arch}`);
    if (!fs.existsSync(path.join(prebuilt, 'ctxkeel.node'))) {
      fs.mkdirSync(prebuilt, { recursive: true });
      fs.copyFileSync(path.join(repoRoot, 'build', 'Release', 'ctxkeel.node'),
        path.join(prebuilt, 'ctxkeel.node'));
    }
    const script = `
      const assert = require('node:assert/strict');
      const { Compactor } = require('ctxkeel');
      const { compactStep } = require('ctxkeel/ai-sdk');
      const { compactionMiddleware, preModelHook } = require('ctxkeel/langchain');
      const { callModelInputFilter } = require('ctxkeel/openai-agents');
      assert.ok(require.resolve('ctxkeel/langchain').startsWith(${JSON.stringify(installed)}));
      const compactor = () => new Compactor({ contextWindow: 8000, storeDir: ${JSON.stringify(dir)} + '/store' });
      assert.throws(() => require.resolve('langchain'), /Cannot find module/);
      assert.throws(() => compactionMiddleware(compactor()), /npm install langchain/);
      preModelHook(compactor());
      (async () => {
        const esm = await Promise.all(['ai-sdk', 'langchain', 'openai-agents']
          .map((name) => import('ctxkeel/' + name)));
        assert.equal(esm[0].compactStep, compactStep);
        assert.equal(esm[1].preModelHook, preModelHook);
        assert.equal(esm[2].callModelInputFilter, callModelInputFilter);
        const messages = [{ role: 'user', content: 'hello' }];
        const step = await compactStep(compactor())({ messages });
        assert.equal(step.messages[0], messages[0]);
        const input = [{ role: 'user', content: 'hello' }];
        const out = await callModelInputFilter(compactor())({ modelData: { input, instructions: 'be brief' } });
        assert.equal(out.input[0], input[0]);
        assert.equal(out.instructions, 'be brief');
        console.log('ok');
      })().catch((err) => { console.error(err); process.exit(1); });
    `;
    const done = execFileSync(process.execPath, ['-e', script], { cwd: app, encoding: 'utf8' });
    assert.equal(done.trim(), 'ok');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
