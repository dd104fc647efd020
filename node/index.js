// ctxkeel for Node.js: loads the native addon, checks arguments, exports the public API.
//
// The addon does the work and checks argument types again (it can be loaded on its own); this
// layer turns option objects into the plain values the addon takes and throws the TypeError or
// RangeError that names the argument before any native code runs.
'use strict';

const util = require('node:util');
const { loadAddon } = require('./loader.js');

const addon = loadAddon();
const { Records } = require('./unchanged.js');

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

/* The estimator names are the core's (ck_estimator_name). */
const ESTIMATORS = addon._estimatorNames;

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

/* The format option: the name goes to the addon, which takes every name the core does. */
function formatOption(options) {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw typeError(`options must be an object, not ${describe(options)}`);
  }
  return options.format;
}

function checkMessages(messages) {
  if (!Array.isArray(messages)) {
    throw typeError(`messages must be an array, not ${describe(messages)}`);
  }
}

/**
 * The estimator option: a name, or a function that counts the tokens of a string (synchronous;
 * an async function is refused at once, a function that returns a Promise when it is called).
 */
function estimatorOption(options) {
  const value = options === undefined || options === null ? undefined : options.estimator;
  if (typeof value !== 'function') return option(options, 'estimator', ESTIMATORS);
  if (util.types.isAsyncFunction(value)) {
    throw typeError('options.estimator must count synchronously, not be an async function');
  }
  return value;
}

/**
 * Estimates tokens for a string, a message, a message list in any dialect or a list of tool
 * schemas (items without "role" that no dialect reads as messages). With a counting function
 * as the estimator, a string is fn(x), a message or a list goes through it message by message
 * (with the per-message overheads), and a tool list is fn(its JSON text).
 */
function estimateTokens(x, options) {
  const estimator = estimatorOption(options);
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
  return addon.checkPairs(messages, formatOption(options));
}

/** A new list with pairing repaired; unchanged messages are the same objects. */
function repairPairs(messages, options) {
  checkMessages(messages);
  return addon.repairPairs(messages, formatOption(options));
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

/** A deep copy of a message for the append-only session, frozen: plain objects and arrays are
 * copied (shared and cyclic ones once), anything else is kept as it is. */
function frozenCopy(value, seen) {
  if (value === null || typeof value !== 'object') return value;
  const proto = Object.getPrototypeOf(value);
  const array = Array.isArray(value);
  if (!array && proto !== Object.prototype && proto !== null) return value;
  if (seen.has(value)) return seen.get(value);
  const copy = array ? new Array(value.length) : Object.create(proto);
  seen.set(value, copy);
  if (array) {
    for (let k = 0; k < value.length; k++) copy[k] = frozenCopy(value[k], seen);
  } else {
    for (const key of Object.keys(value)) {
      // A "__proto__" key (JSON.parse makes one) must stay a key, not become the prototype.
      if (key === '__proto__') {
        Object.defineProperty(copy, key, { value: frozenCopy(value[key], seen), enumerable: true });
      } else {
        copy[key] = frozenCopy(value[key], seen);
      }
    }
  }
  return Object.freeze(copy);
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

// The options the native constructor reads (and checks: types, ranges, threshold order, the
// retention policies and the backend's methods).
const NATIVE_OPTIONS = [
  'contextWindow', 'sessionId', 'storeDir', 'warn', 'soft', 'full', 'emergency', 'keepTail',
  'offloadThreshold', 'toolOffloadThreshold', 'summaryMaxTokens', 'estimator', 'format',
  'pinFirstUser', 'retention', 'backend', 'backendTimeout', 'target', 'keepTailTokens', 'store',
  'promptCache', 'cacheBreakpoints', 'minGain',
];

/** fn(value) now, or once `value` (a Promise) fulfils: one code path for the synchronous form
 * of a method and its Promise form (a compactor with a backend). */
function andThen(value, fn) {
  return value instanceof Promise ? value.then(fn) : fn(value);
}

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
      // Not unref'd: a pending compact() keeps the process alive until the summarizer
      // settles or this fires, as any pending I/O does (else a summarizer that never settles
      // would end the process with exit code 0, the compaction silently lost).
      timer = setTimeout(resolve, ms, { timedOut: true });
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

/**
 * The `summarize` option as a function: a function as it is, an object with a summarize method
 * (an HttpSummarizer, say) as a call of that method on it, null as null.
 */
function summarizerFunction(summarize) {
  if (summarize === null || typeof summarize === 'function') return summarize;
  if (typeof summarize === 'object' &&
      typeof summarize.summarize === 'function') {
    return (request, context) => summarize.summarize(request, context);
  }
  throw typeError('options.summarize must be a function or an object with a summarize ' +
    `method, not ${describe(summarize)}`);
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

/** Calls the host's callback `name`; what it throws (or its Promise rejects with) is a warning. */
function tell(name, fn, value) {
  const report = (err) => process.emitWarning(`ctxkeel: ${name} threw: ${errorText(err)}`, {
    type: 'CtxkeelWarning',
    code: `CK_${name.toUpperCase()}`,
  });
  try {
    const returned = fn(value);
    if (returned && typeof returned.then === 'function') returned.then(undefined, report);
  } catch (err) {
    report(err);
  }
}

/** The read_evidence tool definition, for an OpenAI or Anthropic tool list. */
function readEvidenceTool(format = 'openai') {
  if (typeof format !== 'string') {
    throw typeError(`format must be ${listNames(TOOL_FORMATS)}, not ${describe(format)}`);
  }
  if (!TOOL_FORMATS.includes(format)) throw rangeError(`format must be ${listNames(TOOL_FORMATS)}`);
  return addon.readEvidenceTool(format);
}

/**
 * The parts of a read_evidence call: {shape: 'openai' | 'anthropic', id, args} with args the
 * call's arguments as JSON text for the core ('' for none). A call that is not a read_evidence
 * call at all is the host's mistake and throws; what the model wrote in it is the core's to
 * judge.
 */
function readEvidenceCall(call) {
  checkObject(call, 'call');
  let shape;
  let name;
  let input;
  let where;
  if (call.type === 'tool_use') {
    [shape, name, input, where] = ['anthropic', call.name, call.input, 'call.input'];
  } else if (call.function !== null && typeof call.function === 'object') {
    [shape, name, input, where] = ['openai', call.function.name, call.function.arguments,
      'call.function.arguments'];
  } else {
    throw typeError('call must be an OpenAI tool call or an Anthropic tool_use block');
  }
  if (typeof call.id !== 'string') {
    throw typeError(`call.id must be a string, not ${describe(call.id)}`);
  }
  if (name !== 'read_evidence') {
    throw rangeError(`call must be a call of read_evidence, not of ${JSON.stringify(name)}`);
  }
  return { shape, id: call.id, args: argumentsText(input, where) };
}

/** A tool call's arguments as the JSON text the core reads: a string as it is, nothing as ''
 * (which the core reads as {}), any other value as its JSON.stringify text. */
function argumentsText(input, where) {
  if (typeof input === 'string') return input;
  if (input === undefined) return '';
  try {
    return JSON.stringify(input) ?? '';
  } catch (err) {
    throw typeError(`${where} cannot be written as JSON (${errorText(err)})`);
  }
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
  #backend;
  #onCompaction;
  #onFallback;
  #fallbacksTold = new Set(); // reasons already sent to process.emitWarning
  #records = new Records(); // what the last compact() read, to tell begin() what it may keep
  #session = []; // append(): frozen copies, all read into the history the addon keeps...
  #keptBy = null; // ...when this is 'session'; 'compact' when compact() made that history

  constructor(options) {
    checkObject(options, 'options');
    const { summarizeTimeout = 60, onCompaction = null, onFallback = null, ...rest } =
      knownOptions(options, 'options',
        [...NATIVE_OPTIONS, 'summarizeTimeout', 'onCompaction', 'onFallback']);
    if (typeof summarizeTimeout !== 'number') {
      throw typeError(
        `options.summarizeTimeout must be a number, not ${describe(summarizeTimeout)}`,
      );
    }
    if (!(summarizeTimeout > 0)) {
      throw rangeError('options.summarizeTimeout must be a positive number of seconds');
    }
    for (const [name, fn] of [['onCompaction', onCompaction], ['onFallback', onFallback]]) {
      if (fn !== null && typeof fn !== 'function') {
        throw typeError(`options.${name} must be a function or null, not ${describe(fn)}`);
      }
    }
    const counter = typeof rest.estimator === 'function' ? estimatorOption(rest) : null;
    this.#native = new addon.Compactor(rest);
    this.#timeout = summarizeTimeout;
    this.#estimator = counter ?? this.#native.options.estimator;
    this.#backend = rest.backend ?? null;
    this.#onCompaction = onCompaction;
    this.#onFallback = onFallback;
  }

  /**
   * With a backend, the methods that may reach it return Promises (and reject rather than
   * throw); without one they stay synchronous. fn makes the call.
   */
  #call(fn) {
    if (this.#backend === null) return fn();
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Returns {messages, tier, record, tokensBefore, tokensAfter, ratioBefore, ratioAfter,
   * repairs}: the view of `messages` to send now. `summarize(request)` writes the checkpoint
   * (a string or a Promise of one); without it the extractive summarizer does. A failing
   * summarizer never rejects: the extractive summarizer takes over and record.fallback says
   * why. Rejects with CK_EOVERFLOW when the pinned messages and tool schemas do not fit.
   */
  async compact(messages, options) {
    checkMessages(messages);
    // The caller may push to its list while the summarizer runs; the view is of this moment.
    const snapshot = messages.slice();
    return this.#run(snapshot, options, () => {
      if (this.#keptBy !== 'compact') this.#records.reset();
      this.#keptBy = 'compact';
      return this.#records.update(snapshot);
    });
  }

  /**
   * Adds one message to the compactor's append-only session and returns the session's length.
   * The session keeps a frozen copy (plain objects and arrays are copied; other objects, such
   * as SDK message instances, are kept as given and must not be changed afterwards) and the
   * core reads it at once: a bad message throws an InputError that names its index in the
   * session, and is not added. view() then costs only what was appended since the last one.
   */
  append(message) {
    if (message === null || typeof message !== 'object') {
      throw typeError(`message must be an object, not ${describe(message)}`);
    }
    if (this.#busy) throw ckError('CK_EBUSY', 'concurrent use of Compactor');
    const session = this.#session;
    session.push(frozenCopy(message, new Map()));
    try {
      this.#native.read(session, this.#keptBy === 'session' ? session.length - 1 : 0);
    } catch (err) {
      session.pop();
      throw err;
    }
    this.#keptBy = 'session';
    return session.length;
  }

  /** The messages appended so far (a frozen array of the frozen copies). */
  get session() {
    return Object.freeze(this.#session.slice());
  }

  /**
   * compact() of the append-only session: the view to send now, as compact() returns it (its
   * kept messages are the session's frozen copies). Options as compact()'s.
   */
  async view(options) {
    const snapshot = this.#session.slice();
    return this.#run(snapshot, options, () => {
      const unchanged = this.#keptBy === 'session' ? snapshot.length : 0;
      this.#keptBy = 'session';
      return unchanged;
    }, true);
  }

  async #run(snapshot, options, unchangedCount, vouched = false) {
    const { tools = null, summarize = null, signal = null } = knownOptions(
      options,
      'options',
      ['tools', 'summarize', 'signal'],
    );
    if (tools !== null && !Array.isArray(tools)) {
      throw typeError(`options.tools must be an array, not ${describe(tools)}`);
    }
    const summarizeFn = summarizerFunction(summarize);
    if (signal !== null && !isAbortSignal(signal)) {
      throw typeError(`options.signal must be an AbortSignal, not ${describe(signal)}`);
    }
    if (this.#busy) throw ckError('CK_EBUSY', 'concurrent use of Compactor');
    if (signal && signal.aborted) throw abortError(signal);
    const toolTokens = tools && tools.length
      ? estimateTokens(tools, { estimator: this.#estimator })
      : 0;
    this.#busy = true;
    let job = null;
    // An abort while the backend is waited for stops the wait: the step then ends at once
    // (its puts fail open), and a compaction aborted before it finishes rejects with an
    // AbortError, leaving the session as it was.
    const onAbort = () => this.#native.cancelBackend();
    if (signal && this.#backend !== null) {
      signal.addEventListener('abort', onAbort, { once: true });
    }
    try {
      try {
        const unchanged = unchangedCount();
        // begin reads the messages here and runs the core's work (offloads, the store's
        // writes, an extractive summary) on the libuv pool; so does finish when a summary is
        // to be folded in. The event loop only reads and builds messages.
        job = await this.#native.begin(snapshot, toolTokens, summarizeFn !== null, unchanged,
          vouched);
      } catch (err) {
        // The records may no longer describe the history the addon kept (a getter threw half
        // way, or a message was refused): the next begin() reads every message.
        this.#records.reset();
        this.#keptBy = null;
        throw err;
      }
      if (signal && signal.aborted) throw abortError(signal);
      if (job.needsSummary) await this.#summarize(job, snapshot, summarizeFn, signal);
      const result = await job.finish(snapshot);
      const record = result.record === null ? null : JSON.parse(result.record);
      if (record !== null) this.#report(record);
      return {
        messages: result.messages,
        tier: result.tier,
        record,
        tokensBefore: result.tokensBefore,
        tokensAfter: result.tokensAfter,
        ratioBefore: result.ratioBefore,
        ratioAfter: result.ratioAfter,
        repairs: result.repairs,
        cache: { prefixKept: result.prefixKept, prefixBroken: result.prefixBroken },
      };
    } finally {
      if (signal) signal.removeEventListener('abort', onAbort);
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
    if (record.fallback) {
      // A summarizer that fails (a bad key, a timeout) must not fail every compaction
      // unnoticed: a warning per distinct reason, onFallback every time.
      if (!this.#fallbacksTold.has(record.fallback)) {
        this.#fallbacksTold.add(record.fallback);
        process.emitWarning(`ctxkeel: session ${record.session_id}: the summarizer failed ` +
          `(${record.fallback}); the checkpoint was written by the extractive summarizer`,
        { type: 'CtxkeelWarning', code: 'CTXKEEL_FALLBACK' });
      }
      if (this.#onFallback !== null) tell('onFallback', this.#onFallback, record.fallback);
    }
    if (this.#onCompaction !== null) tell('onCompaction', this.#onCompaction, record);
  }

  /**
   * The tool-time gate: a new message with large tool results offloaded, or the same one (a
   * Promise of it with a backend).
   */
  offload(message) {
    return this.#call(() => {
      checkObject(message, 'message');
      return this.#native.offload(message);
    });
  }

  /** Lines [offset, offset + limit) of an offloaded output; "" past the end (a Promise of
   * them with a backend). */
  readEvidence(ref, options) {
    return this.#call(() => {
      if (typeof ref !== 'string') throw typeError(`ref must be a string, not ${describe(ref)}`);
      const opts = knownOptions(options, 'options', ['offset', 'limit']);
      return this.#native.readEvidence(
        ref,
        integerOption(opts, 'offset', 0, 0),
        integerOption(opts, 'limit', 1, 200),
      );
    });
  }

  /** A Promise of the lines matching `pattern` (POSIX extended syntax, matched in linear
   * time) in one output, or in all of them when ref is null. The search runs on the libuv
   * pool; without a backend the compactor stays usable meanwhile (searches run side by side),
   * with one it is busy until the search is done, as for its other calls. */
  searchEvidence(ref, pattern) {
    if (ref !== null && ref !== undefined && typeof ref !== 'string') {
      return Promise.reject(typeError(`ref must be a string or null, not ${describe(ref)}`));
    }
    if (typeof pattern !== 'string') {
      return Promise.reject(typeError(`pattern must be a string, not ${describe(pattern)}`));
    }
    try {
      return this.#native.searchEvidence(ref ?? null, pattern);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Answers a model's read_evidence call (an OpenAI tool call or an Anthropic tool_use block)
   * with the matching tool result (a Promise of it with a backend). The answer is the core's
   * (ck_compactor_answer_read_evidence): the lines read, the matches of a pattern, or what was
   * wrong with the call, in words the model can act on (the Anthropic result then has
   * is_error).
   */
  handleReadEvidence(call) {
    return this.#call(() => {
      const { shape, id, args } = readEvidenceCall(call);
      return andThen(this.#native.answerReadEvidence(args), ({ text, isError }) => {
        if (shape === 'openai') return { role: 'tool', tool_call_id: id, content: text };
        const result = { type: 'tool_result', tool_use_id: id, content: text };
        if (isError) result.is_error = true;
        return result;
      });
    });
  }

  /** Tells the compactor the provider's prompt size for the last view it returned: a number,
   * or the usage object as the provider or SDK returned it (OpenAI, Anthropic with its cache
   * fields, the AI SDK's usage / totalUsage, Gemini's usageMetadata, or a whole response);
   * the core reads its JSON and counts the whole prompt. */
  observeUsage(usage) {
    const tokens = usage !== null && typeof usage === 'object'
      ? addon.usagePromptTokens(JSON.stringify(usage))
      : usage;
    this.#native.observeUsage(tokens);
  }

  /** Forgets the session state (checkpoint, coverage, offloads) and the appended messages;
   * the audit log stays. */
  reset() {
    this.#native.reset();
    this.#session = [];
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

  /** The options in force, defaults filled in; retention (as [pattern, policy] pairs), backend
   * and a counting estimator only when given. */
  get options() {
    const options = { ...this.#native.options, summarizeTimeout: this.#timeout };
    if (typeof this.#estimator === 'function') options.estimator = this.#estimator;
    if (this.#backend !== null) options.backend = this.#backend;
    return Object.freeze(options);
  }
}

const HTTP_OPTIONS = ['baseUrl', 'model', 'api', 'apiKeyEnv', 'timeout', 'maxRetries', 'headers',
  'backoff', 'reasoningModel', 'extraBody'];
const HTTP_APIS = ['openai', 'anthropic'];
// The bounds the core accepts (csrc/src/http.c); node/src/http.c checks the same ones.
const MAX_HTTP_TIMEOUT = 86400;
const MAX_HTTP_BACKOFF = 3600;
const MAX_HTTP_RETRIES = 20;
// The characters of an HTTP header name (RFC 9110 "token").
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

function stringOption(options, key, { required = false, nullable = false } = {}) {
  const value = options[key];
  if (value === undefined || (nullable && value === null)) {
    if (required) throw typeError(`options.${key} is required`);
    return null;
  }
  if (typeof value !== 'string') {
    throw typeError(`options.${key} must be a string${nullable ? ' or null' : ''}, ` +
      `not ${describe(value)}`);
  }
  if (value.includes('\0')) throw rangeError(`options.${key} must not contain NUL characters`);
  return value;
}

function secondsOption(options, key, max, fallback) {
  const value = options[key];
  if (value === undefined) return fallback;
  if (typeof value !== 'number') {
    throw typeError(`options.${key} must be a number, not ${describe(value)}`);
  }
  if (!(value > 0 && value <= max)) {
    throw rangeError(`options.${key} must be a number of seconds in (0, ${max}]`);
  }
  return value;
}

/** options.headers as a fresh plain object of name -> value, each checked; null for none. */
function headersOption(options) {
  const { headers = null } = options;
  if (headers === null) return null;
  if (typeof headers !== 'object' || Array.isArray(headers)) {
    throw typeError(`options.headers must be an object of strings, not ${describe(headers)}`);
  }
  const checked = {};
  for (const [name, value] of Object.entries(headers)) {
    const where = `options.headers[${JSON.stringify(name)}]`;
    if (!HEADER_NAME.test(name)) {
      throw rangeError(`${where}: a header name is letters, digits and !#$%&'*+-.^_\`|~`);
    }
    if (typeof value !== 'string') {
      throw typeError(`${where} must be a string, not ${describe(value)}`);
    }
    if (/[\r\n\0]/.test(value)) throw rangeError(`${where} must be one line without NUL`);
    checked[name] = value;
  }
  return checked;
}

/** Reads the request of HttpSummarizer.summarize(): {system = '', prompt, maxTokens = 1024}. */
function summaryRequest(request) {
  checkObject(request, 'request');
  const { system = '', prompt, maxTokens = 1024 } = request;
  if (typeof system !== 'string') {
    throw typeError(`request.system must be a string, not ${describe(system)}`);
  }
  if (typeof prompt !== 'string') {
    throw typeError(`request.prompt must be a string, not ${describe(prompt)}`);
  }
  if (typeof maxTokens !== 'number') {
    throw typeError(`request.maxTokens must be a number, not ${describe(maxTokens)}`);
  }
  if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) {
    throw rangeError('request.maxTokens must be a positive integer');
  }
  return { system, prompt, maxTokens };
}

/** The signal of summarize()'s second argument, or null. */
function summarizeSignal(context) {
  if (context === undefined || context === null) return null;
  checkObject(context, 'context');
  const { signal = null } = context;
  if (signal !== null && !isAbortSignal(signal)) {
    throw typeError(`context.signal must be an AbortSignal, not ${describe(signal)}`);
  }
  return signal;
}

/**
 * The built-in HTTP summarizer: asks a model behind an OpenAI-compatible server (POST
 * {baseUrl}/chat/completions) or Anthropic's API (POST {baseUrl}/v1/messages) for the
 * checkpoint. The transfer runs on the libuv thread pool; the event loop never waits for it.
 * Pass it as compact()'s `summarize`, or call summarize() yourself. The API key is read from
 * the environment variable `apiKeyEnv` by the native code at each call; it is never stored.
 */
class HttpSummarizer {
  #native;
  #shown; // what util.inspect shows: the options without header values

  constructor(options) {
    checkObject(options, 'options');
    const o = knownOptions(options, 'options', HTTP_OPTIONS);
    const baseUrl = stringOption(o, 'baseUrl', { required: true });
    if (!/^https?:\/\//.test(baseUrl)) {
      throw rangeError('options.baseUrl must be an http:// or https:// URL');
    }
    const model = stringOption(o, 'model', { required: true });
    if (model === '') throw rangeError('options.model must not be empty');
    const api = option(o, 'api', HTTP_APIS);
    const apiKeyEnv = stringOption(o, 'apiKeyEnv', { nullable: true });
    if (apiKeyEnv !== null && apiKeyEnv.includes('=')) {
      throw rangeError('options.apiKeyEnv must be the name of a variable');
    }
    const timeout = secondsOption(o, 'timeout', MAX_HTTP_TIMEOUT, 60);
    const backoff = secondsOption(o, 'backoff', MAX_HTTP_BACKOFF, 0.5);
    const maxRetries = integerOption(o, 'maxRetries', 0, 3);
    if (maxRetries > MAX_HTTP_RETRIES) {
      throw rangeError(`options.maxRetries must be an integer from 0 to ${MAX_HTTP_RETRIES}`);
    }
    const headers = headersOption(o);
    const { reasoningModel = null, extraBody = null } = o;
    if (reasoningModel !== null && typeof reasoningModel !== 'boolean') {
      throw typeError('options.reasoningModel must be a boolean or null, not ' +
        describe(reasoningModel));
    }
    // The core reads the JSON and refuses anything but one object.
    const extraJson = extraBody === null ? undefined : JSON.stringify(extraBody);
    if (extraBody !== null && typeof extraJson !== 'string') {
      throw typeError(`options.extraBody must be an object, not ${describe(extraBody)}`);
    }
    this.#native = new addon.HttpSummarizer({
      baseUrl, model, api, apiKeyEnv, timeout, maxRetries, headers, backoff,
      reasoningModel: reasoningModel ?? undefined, extraBody: extraJson,
    });
    this.#shown = {
      baseUrl,
      model,
      api,
      apiKeyEnv: apiKeyEnv ?? (api === 'anthropic' ? 'ANTHROPIC_API_KEY' : 'OPENAI_API_KEY'),
      timeout,
      maxRetries,
      backoff,
      headers: headers === null ? [] : Object.keys(headers),
      reasoningModel: this.#native.reasoningModel,
      extraBody: extraBody === null ? [] : Object.keys(extraBody),
    };
  }

  /** True when requests send max_completion_tokens and no temperature: options.reasoningModel,
   * or the core's choice by the model name (o1, o3, o4-mini, gpt-5...). */
  get reasoningModel() {
    return this.#native.reasoningModel;
  }

  /**
   * Asks the model: resolves with its reply text. Rejects with a CtxkeelError whose code is
   * CK_ESUMMARY (an HTTP error, a reply that is not JSON or has no text), CK_ETIMEDOUT,
   * CK_EIO (no connection), CK_ECANCELED (the signal aborted, or close()) or CK_ENOMEM, and
   * whose message is the one-line reason (HTTP status and the provider's message; never the
   * key). Several calls may run at once, each on a thread of the libuv pool.
   */
  async summarize(request, context) {
    const { system, prompt, maxTokens } = summaryRequest(request);
    const signal = summarizeSignal(context);
    if (signal && signal.aborted) throw ckCanceled(signal);
    // The core builds the request body from C strings, so a NUL (a binary tool output in the
    // history, say) would end the prompt there; the rest must reach the model all the same.
    const { promise, id } = this.#native.start(system, prompt, maxTokens);
    if (!signal) return promise;
    // An abort rejects at once, as fetch() does; the native flag stops the transfer behind it
    // (the core notices it between reads), and that late settlement is dropped.
    let onAbort;
    const aborted = new Promise((resolve, reject) => {
      onAbort = () => {
        this.#native.cancel(id);
        reject(ckCanceled(signal));
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
    promise.catch(() => {});
    try {
      return await Promise.race([promise, aborted]);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** {promptTokens, completionTokens} that the provider reported for the last successful
   * call (0 where it reported none), or null before the first. */
  get lastUsage() {
    return this.#native.lastUsage;
  }

  /** The number of transfers in flight. */
  get pending() {
    return this.#native.pending;
  }

  /** Cancels the transfers in flight and releases the native summarizer once they are over;
   * later summarize() calls reject with CK_ECLOSED. Safe to call twice. */
  close() {
    this.#native.close();
  }

  get closed() {
    return this.#native.closed;
  }

  [util.inspect.custom](depth, options, inspect) {
    if (depth < 0) return options.stylize('[HttpSummarizer]', 'special');
    const shown = { ...this.#shown, closed: this.closed, pending: this.pending };
    const inner = { ...options, depth: options.depth === null ? null : options.depth - 1 };
    return `HttpSummarizer ${inspect(shown, inner)}`;
  }
}

/** The rejection of a summary whose signal aborted; its message is the core's reason text. */
function ckCanceled(signal) {
  const err = new CtxkeelError('canceled', { cause: signal.reason });
  err.code = 'CK_ECANCELED';
  return err;
}

const statusCodes = Object.freeze(
  Object.fromEntries(
    Object.entries(addon.statusCodes).map(([name, entry]) => [name, Object.freeze(entry)]),
  ),
);

// ---- replay -------------------------------------------------------------------------------

const REPLAY_OPTIONS = [
  'contextWindow', 'sessionId', 'storeDir', 'warn', 'soft', 'full', 'emergency', 'keepTail',
  'offloadThreshold', 'toolOffloadThreshold', 'summaryMaxTokens', 'estimator', 'format',
  'pinFirstUser', 'title', 'promptCache', 'cacheBreakpoints', 'minGain',
];

/** What replay() returns: the core's rows, one per model call, its totals and its chart. */
class Replay {
  constructor({ rows, totals, svg, sessionId }, contextWindow) {
    this.rows = rows;
    this.totals = totals;
    this.contextWindow = contextWindow;
    this.sessionId = sessionId;
    Object.defineProperty(this, '_svg', { value: svg });
  }

  /** The chart as SVG text: context use per model call, tier bands, a marker per compaction. */
  toSvg() {
    return this._svg;
  }
}

/**
 * Feeds `messages` (a message list, an object with `messages`, or its JSON text) to a new
 * compactor as an agent loop would: before every assistant message the history up to it, and
 * once after the last. The extractive summarizer writes the checkpoints; the evidence store and
 * audit log go under `storeDir` (default ".ctxkeel"). Synchronous.
 */
function replay(messages, options) {
  if (typeof messages !== 'string' && (messages === null || typeof messages !== 'object')) {
    throw typeError(`messages must be an array, an object or JSON text, not ${describe(messages)}`);
  }
  checkObject(options, 'options');
  const { title, ...rest } = knownOptions(options, 'options', REPLAY_OPTIONS);
  if (rest.contextWindow === undefined) throw typeError('options.contextWindow is required');
  if (title !== undefined && typeof title !== 'string') {
    throw typeError(`options.title must be a string, not ${describe(title)}`);
  }
  const text = typeof messages === 'string' ? messages : JSON.stringify(messages);
  return new Replay(addon.replay(text, rest, title), rest.contextWindow);
}

module.exports = {
  replay,
  Replay,
  estimateTokens,
  checkPairs,
  repairPairs,
  parseAnchors,
  mergeAnchors,
  Compactor,
  HttpSummarizer,
  readEvidenceTool,
  version: addon.version,
  statusCodes,
  Error: CtxkeelError,
  CtxkeelError,
  InputError,
};
