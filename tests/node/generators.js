// fast-check arbitraries for agent histories and summarizer behaviours (not a test file).
//
// A history is drawn as a plan (shape-independent turns), then rendered in the OpenAI or the
// Anthropic shape. Each assistant turn makes 0-3 parallel tool calls whose results come in
// order, shuffled, with some missing, with one duplicated, or misplaced (moved after the next
// turn). Texts mix CJK, emoji (ZWJ sequences, skin tones, flags), combining marks, RTL and bidi
// controls, empty strings and arbitrary code points; tool outputs go up to ~200 KB. The last
// turn is always clean, so the newest message of the full history is a valid one.
// (The same model as tests/python/strategies.py.)
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const fc = require('fast-check');
const { rng } = require('./sessions.js');

const FRAGMENTS = [
  '修复解析器里的错误', '不要修改 CI 配置', '必须先运行测试', 'テストを直す', '한국어 메시지',
  '🙂', '👍🏽', '👨‍👩‍👧‍👦', '🇨🇳', 'e\u0301', 'n\u0303\u0323', 'Z\u0351\u0352\u0353',
  'مرحبا بالعالم', 'שלום עולם', '\u202eevil\u202c', '\u200f', '\u200b', '\ufeff',
  'never push to main', 'always run pytest -q', 'src/app/parser.py', '/etc/hosts',
  'https://example.com/issues/4242?x=1&y=2', '3f2a9c1e0b7d4a65a1c2e3f4b5a6c7d8e9f0a1b2',
  '123e4567-e89b-12d3-a456-426614174000', 'E1234', 'JIRA-981', '\t', '\n', '\r\n', ' ',
  '', '{"json": [1, 2, {"k": null}]}', "```python\nprint('hi')\n```", '## User Intent',
  '- N/A', '\\', '"', "'", '<script>alert(1)</script>', '\x01\x7f', '\u{10fffd}',
];

const TOOL_NAMES = ['read_file', 'bash', 'edit_file', 'grep', 'write_file', '工具', 'search 🔍'];

const ID_FORMS = [
  (t, k) => `call_${t}_${k}`,
  (t, k) => `toolu_${String(t).padStart(2, '0')}${k}`,
  (t, k) => `../../etc/passwd_${t}_${k}`,
  (t, k) => `调用-${t}-${k}`,
  (t, k) => `id with spaces ${t} ${k}`,
  (t, k) => `${t}.${k}`,
  (t, k) => `call/${t}\\${k}`,
];

const RESULT_MODES = ['ordered', 'ordered', 'ordered', 'ordered', 'ordered', 'shuffled',
  'missing', 'duplicated', 'misplaced'];

function shortText() {
  return fc.oneof(
    fc.string({ unit: 'binary', maxLength: 30 }),
    fc.string({ unit: 'grapheme', maxLength: 10 }),
    fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 8 }).map((a) => a.join('')),
    fc.constant(''),
  );
}

/** A deterministic text of about `size` bytes: numbered lines of mixed scripts, or one line. */
function bigText(size, seed, oneLine) {
  const rand = rng(seed);
  const parts = [];
  let total = 0;
  for (let n = 0; total < size; n++) {
    const piece = `${FRAGMENTS[Math.floor(rand() * FRAGMENTS.length)]} value_${n} = ` +
      `compute(${Math.floor(rand() * 1e6)})`;
    parts.push(piece);
    total += Buffer.byteLength(piece) + 1;
  }
  return parts.join(oneLine ? ' ' : '\n');
}

/**
 * Tool outputs: mostly short, sometimes over the 4000-byte offload gate (or the 300-byte one
 * some examples use), rarely huge; some are runs of one character (many bytes, few tokens).
 */
function toolOutput() {
  const sized = (min, max) => fc.tuple(fc.integer({ min, max }), fc.integer({ min: 0, max: 65535 }),
    fc.boolean()).map(([size, seed, oneLine]) => bigText(size, seed, oneLine));
  const runs = fc.tuple(fc.constantFrom(' ', '=', '-', '\n', '0', '\t'),
    fc.integer({ min: 250, max: 9000 })).map(([c, n]) => c.repeat(n));
  return fc.oneof(
    { weight: 8, arbitrary: shortText() },
    { weight: 2, arbitrary: sized(4001, 16000) },
    { weight: 1, arbitrary: sized(50000, 200000) },
    { weight: 1, arbitrary: sized(250, 700) },
    { weight: 1, arbitrary: runs },
  );
}

// Ids as some OpenAI-compatible servers make them: every call call_0, or call_<k> in each turn.
const REUSED_ID_FORMS = [() => 'call_0', (t, k) => `call_${k}`];

const RULES = [
  'Never run the migrations against the production database.',
  'Always keep the public API of src/api/handlers.py unchanged.',
  'Do not push to the main branch without a green CI run.',
  'You must write the changelog entry before the release.',
];

// Words of the filler sentences of long user messages: none of them states a rule, so the one
// rule sentence is what the checkpoint's Constraints must keep.
const PROSE = ['the', 'parser', 'reads', 'each', 'input', 'file', 'and', 'writes', 'a',
  'report', 'about', 'what', 'it', 'found', 'in', 'module', 'table', 'cache', 'request',
  'timing', 'was', 'slow', 'on', 'large', 'logs', 'yesterday', '解析器', 'のログ', 'ملف',
  'résumé', '🙂', 'naïve'];

/** About `size` bytes of plain sentences (each ending with a full stop), from `seed`. */
function prose(size, seed) {
  const rand = rng(seed);
  const sentences = [];
  for (let total = 0; total < size;) {
    const n = 6 + Math.floor(rand() * 12);
    const words = Array.from({ length: n }, () => PROSE[Math.floor(rand() * PROSE.length)]);
    const sentence = `${words.join(' ')} (item ${Math.floor(rand() * 1e5)}).`;
    sentences.push(sentence[0].toUpperCase() + sentence.slice(1));
    total += Buffer.byteLength(sentence) + 1;
  }
  return sentences.join(' ');
}

/**
 * A long user message (over the 4 KB excerpt gate when `size` is): sentences of notes with a
 * rule sentence in the middle, where a head-and-tail excerpt would lose it.
 */
function longUserText(size, seed, rule) {
  const half = Math.max(0, Math.floor(size / 2));
  return `Here are my notes from the review. ${prose(half, seed)} ${rule} ` +
    `${prose(half, seed + 1)} Thanks.`;
}

function callTurn(draw, t, clean, opts = {}) {
  const n = draw(fc.integer({ min: clean ? 1 : 0, max: opts.maxCalls || 3 }));
  const calls = [];
  const results = [];
  const idForms = opts.reuseIds ? REUSED_ID_FORMS : ID_FORMS;
  for (let k = 0; k < n; k++) {
    const id = draw(fc.constantFrom(...idForms))(t, k);
    const key = draw(fc.constantFrom('path', 'cmd', 'query'));
    const name = draw(fc.constantFrom(...TOOL_NAMES));
    calls.push({ id, name, args: { [key]: draw(shortText()) } });
    results.push({ id, text: draw(toolOutput()), asBlocks: draw(fc.boolean()) });
  }
  if (clean && opts.hugeNewest) {
    // The newest turn's output alone is larger than most windows (a cat of a big log).
    const [size, seed] = [draw(fc.integer({ min: 300000, max: 1700000 })),
      draw(fc.integer({ min: 0, max: 65535 }))];
    results[n - 1].text = bigText(size, seed, false);
  }
  const mode = clean || n === 0 ? 'ordered' : draw(fc.constantFrom(...RESULT_MODES));
  let now = [...Array(n).keys()];
  let later = [];
  if (mode === 'shuffled') {
    now = draw(fc.shuffledSubarray(now, { minLength: n, maxLength: n }));
  } else if (mode === 'missing') {
    const keep = draw(fc.array(fc.boolean(), { minLength: n, maxLength: n }));
    if (keep.every(Boolean)) keep[draw(fc.integer({ min: 0, max: n - 1 }))] = false;
    now = now.filter((i) => keep[i]);
  } else if (mode === 'duplicated') {
    now = [...now, draw(fc.integer({ min: 0, max: n - 1 }))];
  } else if (mode === 'misplaced') {
    const moved = draw(fc.integer({ min: 0, max: n - 1 }));
    now = now.filter((i) => i !== moved);
    later = [moved];
  }
  const text = draw(fc.option(shortText(), { nil: null }));
  return { kind: 'call', text, calls, results, mode, now, later };
}

function turn(draw, t, clean = false, opts = {}) {
  const kind = draw(fc.constantFrom('call', 'call', 'call', 'user', 'say'));
  if (kind === 'call') return callTurn(draw, t, clean, opts);
  if (kind === 'user' && opts.longUsers && draw(fc.boolean())) {
    const rule = draw(fc.constantFrom(...RULES));
    const text = longUserText(draw(fc.integer({ min: 5000, max: 40000 })),
      draw(fc.integer({ min: 0, max: 65535 })), rule);
    return { kind, text, rule };
  }
  return { kind, text: draw(shortText()) };
}

/**
 * Plans: {pinned: [[role, text]], task, taskBlocks, turns}. Options for agent-like histories
 * (all off by default): maxCalls (parallel calls a turn, default 3), reuseIds (ids as call_0 /
 * call_<k>), hugeNewest (the last turn's last output 0.3-1.7 MB), longUsers (user messages of
 * 5-40 KB with a rule sentence in the middle; such turns carry `rule`).
 */
function plans({ minTurns = 0, maxTurns = 14, ...opts } = {}) {
  return fc.gen().map((g) => {
    const draw = (arb) => g(() => arb);
    const pinned = draw(fc.array(fc.tuple(fc.constantFrom('system', 'developer'), shortText()),
      { maxLength: 2 }));
    const n = draw(fc.integer({ min: minTurns, max: maxTurns }));
    const turns = [];
    for (let t = 0; t < n; t++) turns.push(turn(draw, t, false, opts));
    turns.push(turn(draw, n, true, opts));
    return { pinned, task: draw(shortText()), taskBlocks: draw(fc.boolean()), turns };
  });
}

function isDamaged(plan) {
  return plan.turns.some((t) => t.kind === 'call' &&
    ['missing', 'duplicated', 'misplaced'].includes(t.mode));
}

// ---- rendering ----

function emitCall(out, shape, t) {
  if (shape === 'openai') {
    out.push({
      role: 'assistant',
      content: t.text,
      tool_calls: t.calls.map((c) => ({
        id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.args) },
      })),
    });
    return;
  }
  const blocks = t.text === null ? [] : [{ type: 'text', text: t.text }];
  for (const c of t.calls) blocks.push({ type: 'tool_use', id: c.id, name: c.name, input: c.args });
  out.push({ role: 'assistant', content: blocks.length ? blocks : [{ type: 'text', text: '' }] });
}

function emitResults(out, shape, results) {
  if (!results.length) return;
  const content = (r) => (r.asBlocks ? [{ type: 'text', text: r.text }] : r.text);
  if (shape === 'openai') {
    for (const r of results) out.push({ role: 'tool', tool_call_id: r.id, content: content(r) });
    return;
  }
  out.push({
    role: 'user',
    content: results.map((r) => ({ type: 'tool_result', tool_use_id: r.id, content: content(r) })),
  });
}

/**
 * {messages, info}: the plan as a message list, with info = {pinned: indices of the
 * system/developer messages and the task, task: index of the task, ends: the message count at
 * the end of each turn (agent-loop call points)}.
 */
/**
 * The turns of a plan in order, as render() lays them out: on.user(text), on.say(text),
 * on.call(turn) then on.results(the results given now), a misplaced result after the next turn
 * (before the last, which stays clean), and on.end() after each turn.
 */
function walkTurns(plan, on) {
  let pending = [];
  const last = plan.turns.length - 1;
  plan.turns.forEach((t, index) => {
    let carried = pending;
    pending = [];
    if (index === last && carried.length) { // the final turn stays clean: flush before it
      on.results(carried);
      carried = [];
    }
    if (t.kind === 'user') {
      on.user(t.text);
    } else if (t.kind === 'say') {
      on.say(t.text);
    } else {
      on.call(t);
      on.results(t.now.map((i) => t.results[i]));
      pending = t.later.map((i) => t.results[i]);
    }
    on.results(carried);
    on.end();
  });
}

function render(plan, shape) {
  const out = [];
  const pinned = [];
  const ends = [];
  for (const [role, text] of plan.pinned) {
    pinned.push(out.length);
    out.push({ role, content: text });
  }
  const task = out.length;
  out.push({ role: 'user', content: plan.taskBlocks && shape === 'anthropic'
    ? [{ type: 'text', text: plan.task }] : plan.task });
  pinned.push(task);
  walkTurns(plan, {
    user: (text) => out.push({ role: 'user', content: text }),
    say: (text) => out.push({ role: 'assistant',
      content: shape === 'openai' ? text : [{ type: 'text', text }] }),
    call: (t) => emitCall(out, shape, t),
    results: (done) => emitResults(out, shape, done),
    end: () => ends.push(out.length),
  });
  return { messages: out, info: { pinned, task, ends } };
}

/**
 * {messages, info} as render() gives them, for the plan as Gemini `contents`: system and
 * developer messages go to systemInstruction (not rendered), calls are functionCall parts with
 * ids, results functionResponse parts ('output', or 'result' for a result drawn as blocks).
 * A caller must send turns that alternate, so a turn of the side of the one before it is joined
 * to it, as a Gemini agent's own history is. info.ends counts messages as joined and leaves out
 * the ends whose last message a later turn joined (an agent loop never sees it half made).
 */
function renderGemini(plan) {
  const out = [];
  const ends = [];
  const names = new Map();
  const add = (role, parts) => {
    if (out.length && out[out.length - 1].role === role) out[out.length - 1].parts.push(...parts);
    else out.push({ role, parts: [...parts] });
  };
  const results = (done) => add('user', done.map((r) => ({ functionResponse: { id: r.id,
    name: names.get(r.id), response: { [r.asBlocks ? 'result' : 'output']: r.text } } })));
  add('user', [{ text: plan.task }]);
  walkTurns(plan, {
    user: (text) => add('user', [{ text }]),
    say: (text) => add('model', [{ text }]),
    call: (t) => {
      for (const c of t.calls) names.set(c.id, c.name);
      const parts = t.text === null ? [] : [{ text: t.text }];
      for (const c of t.calls) {
        parts.push({ functionCall: { id: c.id, name: c.name, args: c.args } });
      }
      add('model', parts.length ? parts : [{ text: '' }]);
    },
    results: (done) => { if (done.length) results(done); },
    end: () => ends.push([out.length, out[out.length - 1].parts.length]),
  });
  return { messages: out, info: { pinned: [0], task: 0,
    ends: ends.filter(([n, size]) => out[n - 1].parts.length === size).map(([n]) => n) } };
}

/**
 * {messages, info} as render() gives them, for the plan in the Responses ('responses': input
 * items, calls as function_call items, outputs as function_call_output items), AI SDK
 * ('ai-sdk': ModelMessages, the results of a turn in one tool message) or LangChain
 * ('langchain': model_dump() dicts) dialect. Misplaced results come after the next turn.
 */
function renderDialect(plan, dialect) {
  const out = [];
  const pinned = [];
  const ends = [];
  const names = new Map();
  const say = (role, text) => {
    if (dialect === 'responses') {
      out.push({ type: 'message', role,
        content: [{ type: role === 'assistant' ? 'output_text' : 'input_text', text }] });
    } else if (dialect === 'ai-sdk') {
      out.push({ role, content: role === 'assistant' ? [{ type: 'text', text }] : text });
    } else {
      out.push({ type: { user: 'human', assistant: 'ai' }[role] || role, content: text });
    }
  };
  const call = (t) => {
    for (const c of t.calls) names.set(c.id, c.name);
    if (dialect === 'responses') {
      if (t.text !== null) say('assistant', t.text);
      for (const c of t.calls) {
        out.push({ type: 'function_call', call_id: c.id, name: c.name,
          arguments: JSON.stringify(c.args) });
      }
      if (!t.calls.length && t.text === null) say('assistant', '');
    } else if (dialect === 'ai-sdk') {
      const parts = t.text === null ? [] : [{ type: 'text', text: t.text }];
      for (const c of t.calls) {
        parts.push({ type: 'tool-call', toolCallId: c.id, toolName: c.name, input: c.args });
      }
      out.push({ role: 'assistant', content: parts.length ? parts : [{ type: 'text', text: '' }] });
    } else {
      out.push({ type: 'ai', content: t.text || '', tool_calls: t.calls.map((c) => ({ id: c.id,
        name: c.name, args: c.args, type: 'tool_call' })) });
    }
  };
  const results = (done) => {
    if (!done.length) return;
    if (dialect === 'responses') {
      for (const r of done) {
        out.push({ type: 'function_call_output', call_id: r.id, output: r.text });
      }
    } else if (dialect === 'ai-sdk') {
      out.push({ role: 'tool', content: done.map((r) => ({ type: 'tool-result', toolCallId: r.id,
        toolName: names.get(r.id), output: { type: 'text', value: r.text } })) });
    } else {
      for (const r of done) {
        out.push({ type: 'tool', tool_call_id: r.id, name: names.get(r.id), content: r.text });
      }
    }
  };
  for (const [role, text] of plan.pinned) {
    pinned.push(out.length);
    say(dialect === 'responses' ? role : 'system', text);
  }
  const task = out.length;
  say('user', plan.task);
  pinned.push(task);
  walkTurns(plan, {
    user: (text) => say('user', text),
    say: (text) => say('assistant', text),
    call,
    results,
    end: () => ends.push(out.length),
  });
  return { messages: out, info: { pinned, task, ends } };
}

/** {messages, info, shape, plan}. */
function histories({ shapes = ['openai', 'anthropic'], ...options } = {}) {
  return fc.tuple(plans(options), fc.constantFrom(...shapes)).map(([plan, shape]) => {
    const { messages, info } = render(plan, shape);
    return { messages, info, shape, plan };
  });
}

/**
 * Agent histories of every kind the bounds and nothing-lost tests need: the options of plans()
 * drawn at random (up to 6 parallel calls, reused ids, a huge newest output, long user
 * messages), with `features` saying which were drawn.
 */
function agentHistories({ minTurns = 2, maxTurns = 16, shapes } = {}) {
  return fc.record({ reuseIds: fc.boolean(), hugeNewest: fc.boolean(),
    longUsers: fc.boolean(), maxCalls: fc.constantFrom(3, 6) })
    .chain((features) => histories({ shapes, minTurns, maxTurns, ...features })
      .map((hist) => ({ ...hist, features })));
}

/** Values of `arb` for the seeds given, one each (fast-check's own generation, so a seed
 * always gives the same value). */
function sampleBySeed(arb, seeds) {
  return seeds.map((seed) => fc.sample(arb, { seed, numRuns: 1 })[0]);
}

// ---- summarizer behaviours ----

const ANCHOR_TITLES = ['User Intent', 'Execution Progress', 'Key Decisions', 'Tried Solutions',
  'Next Steps'];

const GARBAGE = ['lorem ipsum dolor sit amet', '{not json', '```json\n{]\n```', '<html></html>',
  'null', '[]', '# \n## \n###', 'N/A', '- N/A', 'I cannot help with that.',
  '\u202e\u202e\u202e', '🙂'.repeat(50)];

function goodReplies() {
  return fc.array(shortText(), { minLength: 5, maxLength: 5 }).map((bodies) => ANCHOR_TITLES
    .map((title, i) => `## ${title}\n${i === 0 ? `Fix the failing parser test. ${bodies[i]}`
      : bodies[i]}\n`).join('\n'));
}

/**
 * {kind, value, async}: what the summarizer does. kind: good, empty, garbage, throw, reject,
 * slow (past the timeout), nonstring; async: whether a reply comes as a Promise.
 */
function replyKinds() {
  const garbage = fc.oneof(fc.constantFrom(...GARBAGE),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 60 })
      .filter((s) => !/[#:*{]/.test(s) && s.trim() !== ''));
  return fc.oneof(
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('good'), value: goodReplies() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('slow'), value: goodReplies() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('empty'),
      value: fc.constantFrom('', ' ', '\n\t  \n') }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('garbage'), value: garbage }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom('throw', 'reject'),
      value: fc.constantFrom('model overloaded 过载', 'HTTP 529', '') }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('nonstring'),
      value: fc.constantFrom(42, undefined, null, { text: 'x' }, ['## Next Steps'], true) }) },
  ).chain((r) => fc.boolean().map((async) => ({ ...r, async })));
}

/**
 * A fast-check reporter: reports a failure with the error and a bounded excerpt of the
 * counterexample (which may hold strings of megabytes), and writes the whole counterexample to
 * a file that CTXKEEL_PROP_REPLAY=<file> runs again (properties.test.js).
 */
function reporter(details) {
  if (!details.failed) return;
  const file = path.join(os.tmpdir(), `ctxkeel-counterexample-${process.pid}.json`);
  let text = '';
  try {
    text = JSON.stringify(details.counterexample);
    fs.writeFileSync(file, text);
  } catch { /* the report below still says what failed */ }
  const error = details.errorInstance;
  throw new Error(`Property failed after ${details.numRuns} runs (seed ${details.seed}, path ` +
    `${String(details.counterexamplePath).slice(0, 80)}, shrunk ${details.numShrinks} times` +
    `${details.interrupted ? ', interrupted' : ''}).\n${error && error.stack}\n` +
    `Counterexample (${text.length} chars, in ${file}): ${text.slice(0, 3000)}`);
}

module.exports = {
  reporter,
  FRAGMENTS,
  RULES,
  REUSED_ID_FORMS,
  longUserText,
  prose,
  agentHistories,
  sampleBySeed,
  bigText,
  shortText,
  plans,
  render,
  renderGemini,
  renderDialect,
  histories,
  isDamaged,
  replyKinds,
  goodReplies,
};
