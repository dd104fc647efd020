// Which leading messages of a history are unchanged since the compactor's last call.
//
// An agent hands its compactor the whole history before every model call, nearly always the
// list of the call before with a message or two added. Reading a message into the core costs
// a dozen Node-API calls and a copy of every string, far more than the core's own work on a
// message it has seen, so the addon keeps the history it read last and begin() is told how
// many leading messages it may keep. This file finds that count.
//
// Objects may be changed in place between calls (a framework appends to a message's content,
// edits a tool call's arguments), so a message is not judged by its identity. Each call walks
// every message and records, in order, every value that the core's readers (csrc/src/
// fmt_openai.c and fmt_anthropic.c, through node/src/values.c) take from it, or more: the
// role, the content string or items, each item's type and fields, the tool calls' ids, names
// and arguments, the ids and names of results, and the JSON text of values the reader
// stringifies (the layout is below). A message is unchanged when its record is value for
// value (===) the one of the message at the same index on the last call: JS strings are
// immutable and === compares their text, so equal records mean the reader would copy the
// same bytes. Reading a field the reader ignores costs a little time, never a wrong answer;
// missing one would, so the walk follows those readers branch for branch and then takes more.
'use strict';

// A record is a sequence in which every value says what follows it, so two records are equal
// only when the walks they came from took the same path through equal values. A message
// starts with a small integer of SHAPE_ bits (which fields it has and of what kind) and only
// the fields it has follow; a list puts its length, then its items (a tool result's content,
// which may be a list or not, puts LIST first when it is one); an item that is not an object
// puts NOT_OBJECT and itself, an object its type and the fields of that type.
const SHAPE_OBJECT = 1; // the message is an object (else only the message itself follows)
const SHAPE_LIST = 2; // content is a list: its length and its items follow (else content)
const SHAPE_CALL_ID = 4; // tool_call_id is there
const SHAPE_NAME = 8; // name is there
const SHAPE_CALLS = 16; // tool_calls is a list: its length and its entries follow
const SHAPE_OTHER_CALLS = 32; // tool_calls is there but not a list: its value follows
const NOT_OBJECT = Symbol('not an object');
const LIST = Symbol('list');

/** A value that equals nothing (a new object each time): the record of a value that cannot be
 * put into words here (JSON.stringify threw), which the reader will then meet itself. */
function unique() {
  return {};
}

function isObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// Records are kept in chunks of CHUNK values: one array of a million values would be copied
// each time it grows, and the copies left behind would raise the peak memory of the first
// call on a long history to three times what the records need.
const SHIFT = 13;
const CHUNK = 1 << SHIFT;
const MASK = CHUNK - 1;

class Records {
  constructor() {
    this.chunks = []; // every message's record, one after the other, CHUNK values an array
    this.ends = []; // ends[i]: where message i's record ends
    this.length = 0; // values in use
    this.pos = 0; // the next value to put or compare
    this.chunk = null; // the chunk that holds `pos`, when pos is not at a chunk's start
    this.end = 0; // while comparing: where the old record ends
    this.same = true; // while comparing: every value so far was equal
    this.comparing = false;
  }

  /** Forgets every record: the next count is 0 (after a call that failed, say). */
  reset() {
    this.chunks.length = 0;
    this.ends.length = 0;
    this.length = 0;
  }

  /**
   * How many leading messages of `messages` (an array) have the records of the last call;
   * the records become those of `messages`.
   */
  update(messages) {
    const n = messages.length;
    let unchanged = 0;
    const old = Math.min(n, this.ends.length);
    while (unchanged < old && this.#compare(unchanged, messages[unchanged])) unchanged++;
    this.ends.length = unchanged;
    this.#seek(unchanged ? this.ends[unchanged - 1] : 0);
    this.comparing = false;
    for (let i = unchanged; i < n; i++) {
      message(this, messages[i]);
      this.ends.push(this.pos);
    }
    this.#truncate(this.pos);
    return unchanged;
  }

  #seek(pos) {
    this.pos = pos;
    this.chunk = this.chunks[pos >>> SHIFT];
  }

  /** Makes `length` the number of values in use; those past it no longer hold strings alive. */
  #truncate(length) {
    const keep = (length + MASK) >>> SHIFT;
    if (length < this.length && (length & MASK)) {
      const base = (keep - 1) * CHUNK;
      this.chunks[keep - 1].fill(undefined, length - base, Math.min(this.length - base, CHUNK));
    }
    this.chunks.length = keep;
    this.length = length;
  }

  #compare(i, msg) {
    this.#seek(i ? this.ends[i - 1] : 0);
    this.end = this.ends[i];
    this.same = true;
    this.comparing = true;
    message(this, msg);
    return this.same && this.pos === this.end;
  }

  put(value) {
    const slot = this.pos & MASK;
    if (slot === 0) this.#enter();
    if (this.comparing) {
      if (this.chunk[slot] !== value) this.same = false;
    } else {
      this.chunk[slot] = value;
    }
    this.pos++;
  }

  /** At the start of a chunk: the chunk, made if there is none yet (the first one grows as
   * values come, so that a short history does not pay for CHUNK slots). A comparison may run
   * past the old record, into the next one or past every value (it reads undefined there, and
   * a chunk made then is dropped by #truncate); only its length check decides then. */
  #enter() {
    const k = this.pos >>> SHIFT;
    if (k === this.chunks.length) this.chunks.push(k ? new Array(CHUNK) : []);
    this.chunk = this.chunks[k];
  }
}

/** The JSON text the reader makes of a value it stringifies (tool_use input, arguments that
 * are not a string). */
function json(r, value) {
  if (typeof value !== 'object' || value === null) {
    r.put(value);
    return;
  }
  let text;
  try {
    text = JSON.stringify(value);
  } catch {
    text = unique();
  }
  r.put(text);
}

/** A tool result's content: a string, or a list of items (a text item's text is joined, any
 * other type is an attachment, so the type is recorded too) and strings. */
function texts(r, content) {
  if (!Array.isArray(content)) {
    r.put(content);
    return;
  }
  r.put(LIST);
  r.put(content.length);
  for (let m = 0; m < content.length; m++) {
    const item = content[m];
    if (isObject(item)) {
      r.put(item.type);
      r.put(item.text);
    } else {
      r.put(NOT_OBJECT);
      r.put(item);
    }
  }
}

/** One item of a content list. */
function block(r, item) {
  if (!isObject(item)) {
    r.put(NOT_OBJECT);
    r.put(item);
    return;
  }
  const type = item.type;
  r.put(type);
  if (type === 'text') {
    r.put(item.text);
  } else if (type === 'tool_use') {
    r.put(item.id);
    r.put(item.name);
    json(r, item.input);
  } else if (type === 'tool_result') {
    r.put(item.is_error);
    r.put(item.tool_use_id);
    texts(r, item.content);
  } else if (type === 'image') {
    // An image with a source is Anthropic's: it can decide the dialect.
    r.put(item.source !== undefined);
  } else if (type !== 'image_url') {
    // Kept whole: its text, thinking or data, else the text or JSON of its content.
    r.put(item.text);
    r.put(item.thinking);
    r.put(item.data);
    json(r, item.content);
  }
}

/** An entry of tool_calls: NOT_OBJECT and itself, or its id, then NOT_OBJECT and its
 * function, or the function's name and arguments. */
function toolCall(r, call) {
  if (!isObject(call)) {
    r.put(NOT_OBJECT);
    r.put(call);
    return;
  }
  r.put(call.id);
  const fn = call.function;
  if (!isObject(fn)) {
    r.put(NOT_OBJECT);
    r.put(fn);
    return;
  }
  r.put(fn.name);
  json(r, fn.arguments);
}

function message(r, msg) {
  if (!isObject(msg)) {
    r.put(0);
    r.put(msg);
    return;
  }
  const { role, content, tool_calls: calls, tool_call_id: callId, name } = msg;
  const list = Array.isArray(content);
  const shape = SHAPE_OBJECT | (list ? SHAPE_LIST : 0) |
    (callId !== undefined ? SHAPE_CALL_ID : 0) | (name !== undefined ? SHAPE_NAME : 0) |
    (Array.isArray(calls) ? SHAPE_CALLS : calls !== undefined ? SHAPE_OTHER_CALLS : 0);
  r.put(shape);
  r.put(role);
  if (shape & SHAPE_CALL_ID) r.put(callId);
  if (shape & SHAPE_NAME) r.put(name);
  if (list) {
    r.put(content.length);
    for (let k = 0; k < content.length; k++) block(r, content[k]);
  } else {
    r.put(content);
  }
  if (shape & SHAPE_CALLS) {
    r.put(calls.length);
    for (let j = 0; j < calls.length; j++) toolCall(r, calls[j]);
  } else if (shape & SHAPE_OTHER_CALLS) {
    r.put(calls);
  }
}

module.exports = { Records };
