'use strict';
// What the framework adapters share: the check of the compactor and options they are given,
// the lazy load of a framework package, and a summarizer that sees the host's own objects.

const { Compactor } = require('../index.js');

// compact()'s per-call options; an adapter hands over the history itself.
const COMPACT_OPTIONS = ['tools', 'summarize', 'signal'];

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return value.constructor ? value.constructor.name : 'an object';
  return typeof value;
}

/** `compactor` is a Compactor that reads what the adapter hands it: format auto or `dialect`. */
function checkCompactor(compactor, adapter, dialect) {
  if (!(compactor instanceof Compactor)) {
    throw new TypeError(`ctxkeel: ${adapter} takes a ctxkeel Compactor, not ${describe(compactor)}`);
  }
  const { format } = compactor.options;
  if (format !== 'auto' && format !== dialect) {
    throw new RangeError(`ctxkeel: ${adapter} hands the compactor ${dialect} messages, but it ` +
      `was made with format '${format}' (use 'auto' or '${dialect}')`);
  }
}

/**
 * The adapter's options, checked now rather than at the first model call: compact()'s
 * per-call options, `summarize` a function, an object with a summarize method (an
 * HttpSummarizer) or null. Returns a copy.
 */
function checkOptions(options, adapter) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`ctxkeel: ${adapter}'s options must be an object, not ${describe(options)}`);
  }
  const unknown = Object.keys(options).filter((key) => !COMPACT_OPTIONS.includes(key));
  if (unknown.length > 0) {
    throw new TypeError(`ctxkeel: ${adapter} got unknown option(s) ${unknown.join(', ')} ` +
      `(compact() takes ${COMPACT_OPTIONS.join(', ')})`);
  }
  const { summarize = null } = options;
  if (summarize !== null && typeof summarize !== 'function' &&
      !(typeof summarize === 'object' && typeof summarize.summarize === 'function')) {
    throw new TypeError('ctxkeel: summarize must be a function (returning a string or a ' +
      `Promise of one) or an HttpSummarizer, not ${describe(summarize)}`);
  }
  if (options.tools !== undefined && options.tools !== null && !Array.isArray(options.tools)) {
    throw new TypeError(`ctxkeel: ${adapter}'s tools must be an array, not ${describe(options.tools)}`);
  }
  return { ...options };
}

/**
 * compact()'s options for one call: the adapter's own (`given`, such as the request's tools)
 * yield to the user's; with `original`, a summarizer function is shown the span of the
 * summary request as the host's own objects (original(converted) gives one back, or null).
 */
function callOptions(options, given, original) {
  const out = { ...given, ...options };
  const { summarize } = options;
  if (typeof summarize === 'function' && original) {
    out.summarize = (request, context) => summarize({
      ...request,
      messages: request.messages.map((m) => original(m) ?? m),
    }, context);
  }
  return out;
}

/** require(name), or an Error that names the npm package to install. */
function framework(name, pkg, adapter) {
  try {
    return require(name);
  } catch (err) {
    if (err && (err.code === 'MODULE_NOT_FOUND' || err.code === 'ERR_MODULE_NOT_FOUND')) {
      const error = new Error(`ctxkeel: ${adapter} needs ${name}: npm install ${pkg}`);
      error.code = 'MODULE_NOT_FOUND';
      error.cause = err;
      throw error;
    }
    throw err;
  }
}

module.exports = { checkCompactor, checkOptions, callOptions, framework, describe };
