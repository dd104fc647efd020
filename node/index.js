// ctxkeel for Node.js: loads the native addon, checks arguments, exports the public API.
//
// The addon does the work and checks argument types again (it can be loaded on its own); this
// layer turns option objects into the plain values the addon takes and throws the TypeError or
// RangeError that names the argument before any native code runs.
'use strict';

const path = require('node:path');

function loadAddon() {
  const root = path.join(__dirname, '..');
  const candidates = [
    path.join(root, 'build', 'Release', 'ctxkeel.node'),
    path.join(root, 'build', 'Debug', 'ctxkeel.node'),
  ];
  for (const file of candidates) {
    try {
      return require(file);
    } catch (err) {
      if (err.code !== 'MODULE_NOT_FOUND') throw err;
    }
  }
  throw new Error(
    `ctxkeel: the native addon is not built (looked for ${candidates.join(' and ')}); ` +
      `run "npm install" (or "node node/build.js") in ${root}`,
  );
}

const addon = loadAddon();

/** Base class of the errors ctxkeel throws; `code` is the CK_E... name of the status. */
class CtxkeelError extends Error {}
Object.defineProperty(CtxkeelError.prototype, 'name', {
  value: 'CtxkeelError',
  writable: true,
  configurable: true,
});

/** Errors caused by bad input (CK_ETYPE, CK_EMISSING, CK_EFORMAT...); `where` names the place. */
class InputError extends CtxkeelError {}
Object.defineProperty(InputError.prototype, 'name', {
  value: 'InputError',
  writable: true,
  configurable: true,
});

addon._setErrorClasses(CtxkeelError, InputError);

const FORMATS = ['auto', 'openai', 'anthropic'];
const ESTIMATORS = ['default', 'chars4'];

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  const type = typeof value;
  if (type === 'undefined') return 'undefined';
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

function typeError(message) {
  const err = new TypeError(`ctxkeel: ${message}`);
  err.code = 'ERR_INVALID_ARG_TYPE';
  return err;
}

function rangeError(message) {
  const err = new RangeError(`ctxkeel: ${message}`);
  err.code = 'ERR_INVALID_ARG_VALUE';
  return err;
}

function listNames(names) {
  const quoted = names.map((n) => `'${n}'`);
  return `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`;
}

/** Reads `options[key]`: no options or no key gives the default, else one of `names`. */
function option(options, key, names) {
  if (options === undefined || options === null) return names[0];
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw typeError(`options must be an object, not ${describe(options)}`);
  }
  const value = options[key];
  if (value === undefined) return names[0];
  if (typeof value !== 'string') {
    throw typeError(`options.${key} must be ${listNames(names)}, not ${describe(value)}`);
  }
  if (!names.includes(value)) throw rangeError(`options.${key} must be ${listNames(names)}`);
  return value;
}

function checkMessages(messages) {
  if (!Array.isArray(messages)) {
    throw typeError(`messages must be an array, not ${describe(messages)}`);
  }
}

/**
 * Estimates tokens for a string, a message, a message list (items have "role") or a list of
 * tool schemas (items without "role").
 */
function estimateTokens(x, options) {
  const estimator = option(options, 'estimator', ESTIMATORS);
  if (typeof x !== 'string' && (x === null || typeof x !== 'object')) {
    throw typeError(
      `x must be a string, a message, a message list or a tool list, not ${describe(x)}`,
    );
  }
  return addon.estimateTokens(x, estimator);
}

/** Every tool-call pairing violation, in message order; [] when the list is valid. */
function checkPairs(messages, options) {
  checkMessages(messages);
  return addon.checkPairs(messages, option(options, 'format', FORMATS));
}

/** A new list with pairing repaired; unchanged messages are the same objects. */
function repairPairs(messages, options) {
  checkMessages(messages);
  return addon.repairPairs(messages, option(options, 'format', FORMATS));
}

/** Parses a model's checkpoint reply into {anchors, summary}. */
function parseAnchors(text) {
  if (typeof text !== 'string') throw typeError(`text must be a string, not ${describe(text)}`);
  return addon.parseAnchors(text);
}

function checkAnchors(value, name) {
  if (value === undefined || value === null) return;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw typeError(`${name} must be an anchors object or null, not ${describe(value)}`);
  }
}

/** Merges anchors: each new value that is not N/A replaces the old one. */
function mergeAnchors(older, newer) {
  checkAnchors(older, 'old');
  checkAnchors(newer, 'new');
  return addon.mergeAnchors(older, newer);
}

const TOOL_FORMATS = ['openai', 'anthropic'];

/** A ctxkeel Error with a CK_E... code, for the conditions this layer detects itself. */
function ckError(code, message) {
  const err = new CtxkeelError(`ctxkeel: ${message}`);
  err.code = code;
  return err;
}

/** The rejection of an aborted compact(), shaped like Node's own AbortError. */
function abortError(signal) {
  const err = new Error('ctxkeel: the compaction was aborted', { cause: signal.reason });
  err.name = 'AbortError';
  err.code = 'ABORT_ERR';
  return err;
}

/** A one-line description of anything thrown, for records and warnings; never throws. */
function errorText(err) {
  try {
    if (err instanceof Error) return err.message || err.name;
    return String(err);
  } catch {
    return 'an unprintable value';
  }
}

function checkObject(value, name) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw typeError(`${name} must be an object, not ${describe(value)}`);
  }
}

/** An optional options object whose keys must all be known (a misspelt or snake_case key would
 * otherwise be ignored without a word). */
function knownOptions(options, name, keys) {
  if (options === undefined || options === null) return {};
  checkObject(options, name);
  for (const key of Object.keys(options)) {
    if (!keys.includes(key)) {
      throw rangeError(`${name}.${key} is not an option (${keys.join(', ')})`);
    }
  }
  return options;
}

function integerOption(options, key, min, fallback) {
  const value = options[key];
  if (value === undefined) return fallback;
  if (typeof value !== 'number') {
    throw typeError(`options.${key} must be a number, not ${describe(value)}`);
  }
  if (!Number.isSafeInteger(value) || value < min) {
    throw rangeError(`options.${key} must be an integer of at least ${min}`);
  }
  return value;
}

function isAbortSignal(value) {
  return value !== null && typeof value === 'object' && typeof value.aborted === 'boolean' &&
    typeof value.addEventListener === 'function';
}

// The options the native constructor reads (and checks: types, ranges, threshold order).
const NATIVE_OPTIONS = [
  'contextWindow', 'sessionId', 'storeDir', 'warn', 'soft', 'full', 'emergency', 'keepTail',
  'offloadThreshold', 'toolOffloadThreshold', 'summaryMaxTokens', 'estimator', 'format',
  'pinFirstUser',
];
// Timers cannot wait longer than this many milliseconds; a longer timeout means none.
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Calls the summarizer and waits for the first of: its reply, the timeout, the caller's abort.
 * Resolves {reply} | {error} | {timedOut: true} | {aborted: true}; never rejects. The
 * summarizer gets a signal that fires when its reply is no longer wanted.
 */
async function callSummarizer(summarize, request, seconds, signal) {
  const stop = new AbortController();
  let timer = null;
  let onAbort = null;
  const waits = [];
  if (signal) {
    waits.push(new Promise((resolve) => {
      onAbort = () => resolve({ aborted: true });
      signal.addEventListener('abort', onAbort, { once: true });
    }));
  }
  const ms = seconds * 1000;
  if (ms <= MAX_TIMER_MS) {
    waits.push(new Promise((resolve) => {
      timer = setTimeout(resolve, ms, { timedOut: true });
      timer.unref();
    }));
  }
  // Called inside the executor so that a summarizer that throws synchronously rejects.
  waits.push(new Promise((resolve) => resolve(summarize(request, { signal: stop.signal })))
    .then((reply) => ({ reply }), (error) => ({ error })));
  try {
    const outcome = await Promise.race(waits);
    if (!('reply' in outcome) && !('error' in outcome)) stop.abort();
    return signal && signal.aborted ? { aborted: true } : outcome;
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

/** Why a summarizer outcome cannot be used as the checkpoint reply, or null when it can. */
function summaryFailure(outcome, seconds) {
  if (outcome.timedOut) return `summarizer timed out after ${seconds} s`;
  if ('error' in outcome) return `summarizer failed: ${errorText(outcome.error)}`;
  if (typeof outcome.reply !== 'string') {
    return `summarizer returned ${describe(outcome.reply)}, not a string`;
  }
  if (outcome.reply.trim() === '') return 'summarizer returned an empty reply';
  return null;
}

function reportCallbackError(err) {
  process.emitWarning(`ctxkeel: onCompaction threw: ${errorText(err)}`, {
    type: 'CtxkeelWarning',
    code: 'CK_ONCOMPACTION',
  });
}

/** The read_evidence tool definition, for an OpenAI or Anthropic tool list. */
function readEvidenceTool(format = 'openai') {
  if (typeof format !== 'string') {
    throw typeError(`format must be ${listNames(TOOL_FORMATS)}, not ${describe(format)}`);
  }
  if (!TOOL_FORMATS.includes(format)) throw rangeError(`format must be ${listNames(TOOL_FORMATS)}`);
  return addon.readEvidenceTool(format);
}

/** Reads a non-negative integer the model wrote (a number or a string of digits). */
function modelInteger(value, fallback) {
  if (value === undefined || value === null) return fallback;
  const n = typeof value === 'string' && /^\s*\d+\s*$/.test(value) ? Number(value) : value;
  return Number.isSafeInteger(n) && n >= 0 ? n : NaN;
}

/**
 * The parts of a read_evidence call: {shape: 'openai' | 'anthropic', id, input}. A call that is
 * not a read_evidence call at all is the host's mistake and throws.
 */
function readEvidenceCall(call) {
  checkObject(call, 'call');
  let shape;
  let name;
  let input;
  if (call.type === 'tool_use') {
    [shape, name, input] = ['anthropic', call.name, call.input];
  } else if (call.function !== null && typeof call.function === 'object') {
    [shape, name, input] = ['openai', call.function.name, call.function.arguments];
  } else {
    throw typeError('call must be an OpenAI tool call or an Anthropic tool_use block');
  }
  if (typeof call.id !== 'string') {
    throw typeError(`call.id must be a string, not ${describe(call.id)}`);
  }
  if (name !== 'read_evidence') {
    throw rangeError(`call must be a call of read_evidence, not of ${JSON.stringify(name)}`);
  }
  return { shape, id: call.id, input };
}

const READ_EVIDENCE_USAGE = 'Call read_evidence with {"ref": "<the ref from the placeholder>", ' +
  '"offset": 0, "limit": 200}.';

/**
 * The model's arguments as {ref, offset, limit}, or {problem} (a sentence for the model) when it
 * got them wrong: JSON text or an object; offset and limit may be numbers or digit strings.
 */
function readEvidenceArgs(input) {
  const explain = (problem) => ({ problem: `read_evidence: ${problem} ${READ_EVIDENCE_USAGE}` });
  let args = input;
  if (typeof args === 'string') {
    try {
      args = args.trim() === '' ? {} : JSON.parse(args);
    } catch (err) {
      return explain(`the arguments are not valid JSON (${errorText(err)}).`);
    }
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    return explain('the arguments must be a JSON object.');
  }
  const { ref } = args;
  const offset = modelInteger(args.offset, 0);
  const limit = modelInteger(args.limit, 200);
  if (typeof ref !== 'string' || ref === '') return explain('"ref" is missing or not a string.');
  if (Number.isNaN(offset)) return explain('"offset" must be a line number from 0.');
  if (Number.isNaN(limit) || limit < 1) return explain('"limit" must be a number of lines from 1.');
  return { ref, offset, limit };
}

/**
 * One agent session's compactor: before every model call, `await compact(history)` returns the
 * view to send. The history stays the caller's; nothing in it is changed.
 */
class Compactor {
  #native;
  #busy = false;
  #timeout;
  #estimator;
  #onCompaction;

  constructor(options) {
    checkObject(options, 'options');
    const { summarizeTimeout = 60, onCompaction = null, ...rest } = knownOptions(
      options,
      'options',
      [...NATIVE_OPTIONS, 'summarizeTimeout', 'onCompaction'],
    );
    if (typeof summarizeTimeout !== 'number') {
      throw typeError(
        `options.summarizeTimeout must be a number, not ${describe(summarizeTimeout)}`,
      );
    }
    if (!(summarizeTimeout > 0)) {
      throw rangeError('options.summarizeTimeout must be a positive number of seconds');
    }
    if (onCompaction !== null && typeof onCompaction !== 'function') {
      throw typeError(
        `options.onCompaction must be a function or null, not ${describe(onCompaction)}`,
      );
    }
    this.#native = new addon.Compactor(rest);
    this.#timeout = summarizeTimeout;
    this.#estimator = this.#native.options.estimator;
    this.#onCompaction = onCompaction;
  }

  /**
   * Returns {messages, tier, record, tokensBefore, tokensAfter}: the view of `messages` to send
   * now. `summarize(request)` writes the checkpoint (a string or a Promise of one); without it
   * the extractive summarizer does. A failing summarizer never rejects: the extractive
   * summarizer takes over and record.fallback says why.
   */
  async compact(messages, options) {
    checkMessages(messages);
    const { tools = null, summarize = null, signal = null } = knownOptions(
      options,
      'options',
      ['tools', 'summarize', 'signal'],
    );
    if (tools !== null && !Array.isArray(tools)) {
      throw typeError(`options.tools must be an array, not ${describe(tools)}`);
    }
    if (summarize !== null && typeof summarize !== 'function') {
      throw typeError(`options.summarize must be a function, not ${describe(summarize)}`);
    }
    if (signal !== null && !isAbortSignal(signal)) {
      throw typeError(`options.signal must be an AbortSignal, not ${describe(signal)}`);
    }
    if (this.#busy) throw ckError('CK_EBUSY', 'concurrent use of Compactor');
    if (signal && signal.aborted) throw abortError(signal);
    const toolTokens = tools && tools.length
      ? estimateTokens(tools, { estimator: this.#estimator })
      : 0;
    // The caller may push to its list while the summarizer runs; the view is of this moment.
    const snapshot = messages.slice();
    this.#busy = true;
    let job = null;
    try {
      job = this.#native.begin(snapshot, toolTokens, summarize !== null);
      if (job.needsSummary) await this.#summarize(job, snapshot, summarize, signal);
      const result = job.finish(snapshot);
      const record = result.record === null ? null : JSON.parse(result.record);
      if (record !== null) this.#report(record);
      return {
        messages: result.messages,
        tier: result.tier,
        record,
        tokensBefore: result.tokensBefore,
        tokensAfter: result.tokensAfter,
      };
    } finally {
      if (job) job.free();
      this.#busy = false;
    }
  }

  async #summarize(job, snapshot, summarize, signal) {
    const { system, prompt, maxTokens, tier, spanStart, spanEnd, previous } = job.request();
    const request = {
      system,
      prompt,
      maxTokens,
      tier,
      messages: snapshot.slice(spanStart, spanEnd),
      previous,
    };
    const outcome = await callSummarizer(summarize, request, this.#timeout, signal);
    if (outcome.aborted) throw abortError(signal);
    const failure = summaryFailure(outcome, this.#timeout);
    if (failure === null) job.setSummary(outcome.reply);
    else job.setFailure(failure);
  }

  #report(record) {
    if (this.#onCompaction === null) return;
    try {
      const returned = this.#onCompaction(record);
      if (returned && typeof returned.then === 'function') {
        returned.then(undefined, reportCallbackError);
      }
    } catch (err) {
      reportCallbackError(err);
    }
  }

  /** The tool-time gate: a new message with large tool results offloaded, or the same one. */
  offload(message) {
    checkObject(message, 'message');
    return this.#native.offload(message);
  }

  /** Lines [offset, offset + limit) of an offloaded output; "" past the end. */
  readEvidence(ref, options) {
    if (typeof ref !== 'string') throw typeError(`ref must be a string, not ${describe(ref)}`);
    const opts = knownOptions(options, 'options', ['offset', 'limit']);
    return this.#native.readEvidence(
      ref,
      integerOption(opts, 'offset', 0, 0),
      integerOption(opts, 'limit', 1, 200),
    );
  }

  /** Lines matching a POSIX extended regular expression, in one output or (ref null) all. */
  searchEvidence(ref, pattern) {
    if (ref !== null && ref !== undefined && typeof ref !== 'string') {
      throw typeError(`ref must be a string or null, not ${describe(ref)}`);
    }
    if (typeof pattern !== 'string') {
      throw typeError(`pattern must be a string, not ${describe(pattern)}`);
    }
    return this.#native.searchEvidence(ref ?? null, pattern);
  }

  /**
   * Answers a model's read_evidence call (an OpenAI tool call or an Anthropic tool_use block)
   * with the matching tool result. The model's mistakes come back as text it can act on.
   */
  handleReadEvidence(call) {
    const { shape, id, input } = readEvidenceCall(call);
    const args = readEvidenceArgs(input);
    let content = args.problem;
    let isError = Boolean(content);
    if (!isError) {
      try {
        content = this.readEvidence(args.ref, { offset: args.offset, limit: args.limit });
        const next = args.offset + args.limit;
        if (content === '') {
          isError = true;
          content = `read_evidence: "${args.ref}" has no lines from line ${args.offset} on ` +
            '(offset counts lines from 0).';
        } else if (this.readEvidence(args.ref, { offset: next, limit: 1 }) !== '') {
          content += `\n[ctxkeel: more lines follow; call read_evidence with ref ` +
            `${JSON.stringify(args.ref)} and offset ${next}]`;
        }
      } catch (err) {
        if (!(err instanceof InputError)) throw err;
        isError = true;
        content = `read_evidence: no evidence named ${JSON.stringify(args.ref)} in this ` +
          'session; use the ref that a "[ctxkeel: tool output offloaded]" placeholder names.';
      }
    }
    if (shape === 'openai') return { role: 'tool', tool_call_id: id, content };
    const result = { type: 'tool_result', tool_use_id: id, content };
    if (isError) result.is_error = true;
    return result;
  }

  /** Tells the compactor the provider's prompt-token count for the last view it returned. */
  observeUsage(promptTokens) {
    this.#native.observeUsage(promptTokens);
  }

  /** Forgets the session state (checkpoint, coverage, offloads); the audit log stays. */
  reset() {
    this.#native.reset();
  }

  /** Frees the native state now; every later call throws CK_ECLOSED. */
  close() {
    this.#native.close();
  }

  get closed() {
    return this.#native.closed;
  }

  get sessionId() {
    return this.#native.sessionId;
  }

  /** The correction factor learnt from observeUsage (1 until then). */
  get usageFactor() {
    return this.#native.usageFactor;
  }

  /** The options in force, defaults filled in. */
  get options() {
    return Object.freeze({ ...this.#native.options, summarizeTimeout: this.#timeout });
  }
}

const statusCodes = Object.freeze(
  Object.fromEntries(
    Object.entries(addon.statusCodes).map(([name, entry]) => [name, Object.freeze(entry)]),
  ),
);

module.exports = {
  estimateTokens,
  checkPairs,
  repairPairs,
  parseAnchors,
  mergeAnchors,
  Compactor,
  readEvidenceTool,
  version: addon.version,
  statusCodes,
  Error: CtxkeelError,
  CtxkeelError,
  InputError,
};
