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

function compactorFor(records, options = {}) {
  const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ctxkeel-int-'));
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
