// Type declarations for ctxkeel (hand-written; see node/index.js and docs/mapping.md).

/** A message format: Chat Completions ("openai"), Messages API ("anthropic"), or detected. */
export type Format =
  'auto' | 'openai' | 'anthropic' | 'responses' | 'gemini' | 'ai-sdk' | 'langchain';

/** Token estimators: exact o200k_base or cl100k_base counts, the default (o200k_base, estimated
 * only for one unbroken run over 64 KB), or UTF-8 bytes / 4 rounded up. */
export type Estimator = 'default' | 'chars4' | 'cl100k' | 'o200k';

/**
 * A host token counter: the number of tokens in `text` from your own tokenizer, a
 * non-negative integer, answered synchronously. A Promise is refused (TypeError), as is a
 * negative or fractional count (RangeError); what it throws fails the call that used it.
 */
export type TokenCounter = (text: string) => number;

/** An OpenAI tool call as it appears in an assistant message's `tool_calls`. */
export interface ToolCall {
  id: string;
  type?: 'function' | (string & {});
  function: {
    name: string;
    /** JSON text; a non-string value is read as its JSON.stringify text. */
    arguments?: string | unknown;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/** A text content block. */
export interface TextBlock {
  type: 'text';
  text: string;
  [key: string]: unknown;
}

/** An Anthropic tool_use block. `input` is read as its JSON.stringify text. */
export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input?: unknown;
  [key: string]: unknown;
}

/** An Anthropic tool_result block. */
export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content?: string | Array<TextBlock | ContentBlock | string> | null;
  is_error?: boolean;
  [key: string]: unknown;
}

/** Any other block (images, thinking, documents...); kept untouched. */
export interface ContentBlock {
  type: string;
  [key: string]: unknown;
}

/**
 * A message in either format. Unknown fields are kept as they are; content is a string, a
 * list of blocks (bare strings are text), null or absent.
 */
export interface Message {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool' | (string & {});
  content?:
    | string
    | Array<TextBlock | ToolUseBlock | ToolResultBlock | ContentBlock | string>
    | null;
  /** OpenAI: the calls of an assistant message. */
  tool_calls?: ToolCall[] | null;
  /** OpenAI: the call a role "tool" message answers (required for role "tool"). */
  tool_call_id?: string;
  [key: string]: unknown;
}

/** A tool schema as sent to a provider (any JSON object; counted by its JSON text): the SDKs'
 * own tool interfaces (OpenAI ChatCompletionTool, Anthropic Tool, ...) are ones. */
export type ToolSchema = object;

export interface EstimateOptions {
  /** Default 'default'. A TokenCounter counts a string as fn(x), a message or a list message
   * by message (with the per-message overheads), a tool list as fn(its JSON text). */
  estimator?: Estimator | TokenCounter;
}

export interface FormatOptions {
  /** Default 'auto': Anthropic when any Anthropic block is present, else OpenAI. */
  format?: Format;
}

/** The kinds of tool-call pairing violation. */
export type PairIssueKind =
  | 'orphan_result'
  | 'missing_result'
  | 'not_adjacent'
  | 'duplicate_result'
  | 'duplicate_call'
  | 'empty_id'
  | 'misplaced'
  | 'result_order';

export interface PairViolation {
  kind: PairIssueKind;
  /** Index of the message in the list. */
  index: number;
  /** Index of the part in that message: content items first, then tool_calls. */
  part: number;
  /** The tool-call id involved ('' when it is empty). */
  toolCallId: string;
  /** A sentence describing the violation, for logs. */
  message: string;
}

/** The five anchors of a checkpoint, in their fixed order; null means N/A. */
export interface Anchors {
  user_intent: string | null;
  execution_progress: string | null;
  key_decisions: string | null;
  tried_solutions: string | null;
  next_steps: string | null;
}

/** Input to mergeAnchors: missing keys, null and N/A text ("N/A", "- N/A", "none") are N/A. */
export type AnchorsInput = Partial<Record<keyof Anchors, string | null>>;

export interface ParsedAnchors {
  anchors: Anchors;
  /** The free summary ('' when there is none). */
  summary: string;
}

/** A status code of the core. */
export type StatusName =
  | 'CK_OK'
  | 'CK_ENOMEM'
  | 'CK_EINVAL'
  | 'CK_ESYNTAX'
  | 'CK_ETYPE'
  | 'CK_EMISSING'
  | 'CK_EUTF8'
  | 'CK_EFORMAT'
  | 'CK_ETOOBIG'
  | 'CK_EIO'
  | 'CK_ECLOSED'
  | 'CK_EBUSY'
  | 'CK_ETIMEDOUT'
  | 'CK_ECANCELED'
  | 'CK_ESUMMARY'
  | 'CK_ESTATE'
  | 'CK_ECONFLICT'
  | 'CK_EOVERFLOW';

export interface StatusCode {
  /** 0 for CK_OK, negative for errors. */
  readonly code: number;
  /** A short description. */
  readonly text: string;
}

/**
 * Tokens for a string, a message, a message list (items have "role") or a list of tool schemas
 * (items without "role" that no dialect reads as messages, counted by their JSON text). 'o200k' and 'cl100k' count exactly as
 * tiktoken does for those encodings (special tokens counted as text); 'default' is o200k,
 * estimated only for a single unbroken run of more than 64 KB; these add a per-message and a
 * per-list overhead. 'chars4' is ceil(UTF-8 bytes / 4).
 * @throws {TypeError} when `x` is none of these.
 * @throws {InputError} with code CK_ETYPE / CK_EMISSING for a malformed message.
 */
export function estimateTokens(
  x: string | object | readonly object[],
  options?: EstimateOptions | null,
): number;

/**
 * Every violation of the provider's tool-call rules, in message order; [] when valid.
 * @throws {TypeError} when `messages` is not an array.
 * @throws {InputError} CK_ETYPE / CK_EMISSING for a malformed message, CK_EFORMAT when the
 * list mixes formats or does not match `options.format`.
 */
export function checkPairs(
  messages: readonly object[],
  options?: FormatOptions | null,
): PairViolation[];

/**
 * A new list that passes checkPairs: results without a call and duplicates dropped, a stub
 * result added for each call without one, results moved right after their call. Unchanged
 * messages are the same objects; the input is never mutated; repairing twice changes nothing.
 * @throws like checkPairs.
 */
export function repairPairs<M extends object>(
  messages: readonly M[],
  options?: FormatOptions | null,
): M[];

/** Parses a model's checkpoint reply (Markdown sections or JSON). Never fails on odd text. */
export function parseAnchors(text: string): ParsedAnchors;

/**
 * Merges two anchor sets: each anchor of `newer` that is not N/A replaces the one of `older`.
 * @throws {TypeError} when an argument is not an object, null or undefined.
 * @throws {InputError} CK_ETYPE when an anchor value is neither a string nor null.
 */
export function mergeAnchors(
  older: AnchorsInput | null | undefined,
  newer: AnchorsInput | null | undefined,
): Anchors;

/** Compaction tiers, in order of severity (DESIGN section 2). */
export type Tier = 'none' | 'warn' | 'soft' | 'full' | 'emergency';

/**
 * What the placeholder of an offloaded tool output keeps, for the tools a pattern names. A key
 * left out is 0 (zero means zero: no head, no tail, no error lines), except maxBytes, where 0
 * means the gate's cap (1 KB at compaction, 2 KB in offload()).
 */
export interface RetentionPolicy {
  /** First lines kept. */
  head?: number;
  /** Last lines kept. */
  tail?: number;
  /** At most this many lines that carry errors (error, failed, exception, traceback, panic,
   * exit code...), kept between head and tail. */
  errors?: number;
  /** The preview's cap in bytes; 0 means the gate's. */
  maxBytes?: number;
  /** false keeps this tool's outputs in the view, never offloaded. Default true. */
  offload?: boolean;
}

/**
 * Retention policies by tool name or shell-style pattern (* ? [...]): an object (its key order
 * is the match order) or an array of [pattern, policy] pairs. The first match wins; tools no
 * pattern matches keep the built-in rule (first lines, plus error lines and last lines for
 * command-like output). In offload() the tool is the result's own `name` field when it has one
 * (the call is not at hand there); without it the name matched is 'tool', which '*' matches.
 */
export type Retention =
  | Record<string, RetentionPolicy>
  | ReadonlyArray<readonly [string, RetentionPolicy]>;

/**
 * Your own storage for offloaded outputs, used instead of files under storeDir (the audit log
 * stays there). Keys are "tool_results/<session>/<file>.txt", made only of [A-Za-z0-9._~-] and
 * '/'. Either method may return a Promise. A put that throws or rejects leaves the output in the
 * view (fail-open) and the record's `error` names the key and the reason; a get that throws,
 * rejects or gives something else than a string, null or undefined makes the read fail with
 * CK_EIO (its `cause` is what the backend threw). get is also asked before a key is first
 * written. Calls come on the main thread, one at a time.
 */
export interface EvidenceBackend {
  put(key: string, text: string): unknown;
  /** The text stored under `key`, or null / undefined when there is none. */
  get(
    key: string,
  ): string | null | undefined | PromiseLike<string | null | undefined>;
}

/** T, or a Promise of T for a compactor with an evidence backend. */
export type WithBackend<B, T> = [B] extends [undefined | null] ? T : Promise<T>;

export interface CompactorOptions<B extends EvidenceBackend | undefined = undefined> {
  /** The model's context window in tokens (required; a positive integer). */
  contextWindow: number;
  /** The session's id; null (the default) makes a random one, and nothing is resumed. With an
   * id whose audit log exists under storeDir, the last checkpoint is resumed from it. */
  sessionId?: string | null;
  /** Where evidence and audit logs go. Default '.ctxkeel'. */
  storeDir?: string;
  /** The built-in S3 backend, 's3://BUCKET/PREFIX?region=R&endpoint=E' (credentials from
   * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN): evidence, audit records
   * (compactions/<session>/<seq>.json) and the state a session resumes from all go there, so
   * a Compactor with the same sessionId in another process resumes with no summary call.
   * Excludes backend. */
  store?: string;
  /** Tier thresholds as fractions of the window, each in (0, 1] and increasing.
   * Defaults 0.6, 0.7, 0.8, 0.95. */
  warn?: number;
  soft?: number;
  full?: number;
  emergency?: number;
  /** Messages kept verbatim at the end (widened to whole turns). Default 6. */
  keepTail?: number;
  /** Where every compaction brings the view, as a fraction of the window, in (0, 1] and below
   * `soft`. Default 0.5. */
  target?: number;
  /** The verbatim tail's token budget (the tail is the newest whole turns within both keepTail
   * messages and this many tokens, never less than the newest turn). A positive integer;
   * default contextWindow / 4. */
  keepTailTokens?: number;
  /** Compaction-time offload gate, in bytes. Default 4000. */
  offloadThreshold?: number;
  /** offload() gate, in bytes. Default 10000. */
  toolOffloadThreshold?: number;
  /** Bound of the checkpoint; null (the default) means window / 20 within [256, 8192]. */
  summaryMaxTokens?: number | null;
  /** Seconds to wait for the summarizer before the extractive one takes over. Default 60. The
   * timer does not keep the process alive: a summarizer that waits on nothing (no socket, no
   * timer) lets the process exit before the timeout. */
  summarizeTimeout?: number;
  /** Default 'default'. A TokenCounter is used for every estimate the compactor makes (each
   * message content is counted once and cached); what it throws, or a bad answer, makes
   * compact() reject with that error, and a compaction that was not finished leaves the
   * session as it was. */
  estimator?: Estimator | TokenCounter;
  /** Default 'auto'. */
  format?: Format;
  /** Pin the first user message (the task) verbatim. Default true. */
  pinFirstUser?: boolean;
  /** Retention policies per tool (see Retention). */
  retention?: Retention | null;
  /** Your own evidence storage. With one, offload(), readEvidence() and handleReadEvidence()
   * return Promises (searchEvidence() always does), and the compactor's work runs on a libuv
   * thread. */
  backend?: B;
  /** Seconds one put or get of the backend may take before it counts as failed (fail-open:
   * the output stays in the view, the record says "backend timed out", and the backend is not
   * called again during that step); compact()'s `signal` stops the wait too. Default 10, at
   * most 86400 (the core's range: CK_EINVAL outside it). */
  backendTimeout?: number;
  /** The provider's prompt-cache prices, relative to uncached input: 'anthropic' (reads 0.1,
   * writes 1.25), 'openai' (0.1 and 1) or your own, read in (0, 1] and write in [1, 10]. With
   * them a soft compaction or a batched offload changes the view only when the reads it saves
   * before the view would reach `full` outweigh the cache it re-bills (the record's
   * cache.estimate says the figures); full and emergency never wait. Default null: no cost
   * model. */
  promptCache?: PromptCache | null;
  /** Anthropic views: cache_control markers on the checkpoint and on the last pinned message
   * before it, within the provider's four with your own counted. Your messages keep theirs and
   * gain none. Default false. */
  cacheBreakpoints?: boolean;
  /** Tokens the warn tier's offloads of old outputs must free together before they change the
   * view (each change re-bills the cached prefix after it). Default contextWindow / 20. */
  minGain?: number;
  /** Called with every audit record, after the compaction that wrote it. What it throws (or a
   * Promise it returns rejects with) is reported with process.emitWarning. */
  onCompaction?: ((record: CompactionRecord) => void | Promise<void>) | null;
  /** Called with the reason of every compaction whose checkpoint the extractive summarizer
   * wrote because the summarizer failed. Each distinct reason is also reported once per
   * compactor with process.emitWarning (code 'CTXKEEL_FALLBACK'). */
  onFallback?: ((reason: string) => void | Promise<void>) | null;
}

/** Prompt-cache prices: a preset's name or per-token prices relative to uncached input. */
export type PromptCache = 'anthropic' | 'openai' | { read: number; write: number };

/** The options in force, defaults filled in (Compactor.options). */
export interface ResolvedCompactorOptions {
  readonly contextWindow: number;
  readonly sessionId: string;
  readonly storeDir: string;
  /** The S3 store's URL, normalized and without credentials; null without one. */
  readonly store: string | null;
  readonly warn: number;
  readonly soft: number;
  readonly full: number;
  readonly emergency: number;
  readonly keepTail: number;
  readonly target: number;
  readonly keepTailTokens: number;
  readonly offloadThreshold: number;
  readonly toolOffloadThreshold: number;
  readonly summaryMaxTokens: number;
  readonly summarizeTimeout: number;
  readonly backendTimeout: number;
  readonly estimator: Estimator | TokenCounter;
  readonly format: Format;
  readonly pinFirstUser: boolean;
  /** null without a cost model. */
  readonly promptCache: { readonly read: number; readonly write: number } | null;
  readonly cacheBreakpoints: boolean;
  readonly minGain: number;
  /** Only when policies were given: them, as [pattern, policy] pairs with every key filled. */
  readonly retention?: ReadonlyArray<readonly [string, Required<RetentionPolicy>]>;
  /** Only when one was given. */
  readonly backend?: EvidenceBackend;
}

/** What a summarizer is asked to do. */
export interface SummaryRequest<M extends object = Message> {
  /** The system prompt. */
  system: string;
  /** The user prompt: instructions, the previous checkpoint, the messages (fenced as data). */
  prompt: string;
  /** The reply's budget in tokens. */
  maxTokens: number;
  /** 'soft' or 'full'. */
  tier: Tier;
  /** The caller's own message objects being summarized (a slice of the list given to
   * compact()). */
  messages: M[];
  /** The previous checkpoint's text, or null. */
  previous: string | null;
}

/**
 * Writes a checkpoint: returns Markdown sections (## User Intent, ## Execution Progress,
 * ## Key Decisions, ## Tried Solutions, ## Next Steps, ## Summary) or JSON with those keys. The
 * signal fires when the reply is no longer wanted (timeout or abort).
 */
export type Summarizer<M extends object = Message> = (
  request: SummaryRequest<M>,
  context: { signal: AbortSignal },
) => string | PromiseLike<string>;

/** A checkpoint writer as an object: its summarize method is called (with it as `this`) like
 * a Summarizer function. HttpSummarizer is one. */
export interface SummarizerObject<M extends object = Message> {
  summarize(
    request: SummaryRequest<M>,
    context: { signal: AbortSignal },
  ): string | PromiseLike<string>;
}

export interface CompactOptions<M extends object = Message> {
  /** The tool schemas sent with the request; their tokens count towards the window. */
  tools?: readonly ToolSchema[] | null;
  /** The checkpoint writer: a function, or an object with a summarize method (such as an
   * HttpSummarizer); null or absent means the built-in extractive summarizer. */
  summarize?: Summarizer<M> | SummarizerObject<M> | null;
  /** Aborting rejects compact() with an Error named 'AbortError' (code 'ABORT_ERR'). */
  signal?: AbortSignal | null;
}

/** One tool output moved to the evidence store. */
export interface OffloadedOutput {
  tool_call_id: string;
  /** The evidence id to read it back by: the tool-call id, or "<id>#<hash>" when an agent
   * reused the id for another output. */
  ref?: string;
  /** A hash of the output's text (16 hex digits). */
  hash?: string;
  tool_name: string;
  path: string;
  bytes: number;
  lines: number;
}

/** What a repair of the tool-call pairing did (CompactionResult.repairs). */
export type RepairKind =
  | 'orphan_dropped'
  | 'duplicate_dropped'
  | 'misplaced_dropped'
  | 'stub_added'
  | 'call_dropped'
  | 'result_moved'
  | 'kept_as_text';

/** One change the pairing repair made; what it dropped was stored first. */
export interface Repair {
  kind: RepairKind;
  /** The message's index in the list given to compact(). */
  index: number;
  /** The tool-call id involved ('' when it is empty). */
  toolCallId: string;
}

/** An audit record (DESIGN section 8), one line of <storeDir>/compactions/<sessionId>.jsonl. */
export interface CompactionRecord {
  id: string;
  session_id: string;
  /** ISO 8601. */
  timestamp: string;
  tier: Tier;
  tokens_before: number;
  tokens_after: number;
  /** What the view does to the provider's prompt cache: tokens of the view that are a prefix
   * of the view returned before, and tokens of that earlier view after the prefix. */
  cache: {
    prefix_kept: number;
    prefix_broken: number;
    /** With promptCache, when the change was weighed: the calls until the view would reach
     * full, the billed input tokens the change saves over them and those it costs. */
    estimate?: { horizon: number; saves: number; invalidates: number };
  };
  msgs_before: number;
  msgs_after: number;
  /** Messages folded into the checkpoint by this compaction. */
  summarized: number;
  preserved_tail: number;
  offloaded: OffloadedOutput[];
  anchors: Anchors;
  /** The checkpoint message's text, or null when there is none. */
  checkpoint: string | null;
  /** How much of the history the checkpoint stands for. */
  covered: { count: number; fingerprint: string } | null;
  duration_ms: number;
  /** What went wrong without failing the compaction ('; '-separated), or null. */
  error: string | null;
  /** Routine decisions of this compaction ("tail messages folded", "the state was started
   * afresh"...). */
  notes: string[];
  /** The view before and after over the window: tool schemas included, usage factor applied. */
  ratio_before: number;
  ratio_after: number;
  window: number;
  /** The repairs of the pairing, as in CompactionResult.repairs (snake_case here). */
  repairs: Array<{ kind: RepairKind; index: number; tool_call_id: string }>;
  /** Only when messages were folded: where each folded span was archived (read it back by
   * `ref`). */
  archived?: Array<{ ref: string; path: string; first: number; end: number }>;
  /** The session state after this compaction: in full ("snapshot") or what changed ("delta"). */
  state: { kind: 'snapshot' | 'delta'; [key: string]: unknown } | null;
  /** The record's integrity tag (HMAC under the store's key). */
  mac?: string;
  /** Why the extractive summarizer wrote the checkpoint instead of the model, or null. */
  fallback: string | null;
  estimator: Estimator;
  [key: string]: unknown;
}

export interface CompactionResult<M extends object = Message> {
  /** The view to send: unchanged messages are the caller's objects; the others (checkpoint,
   * placeholders, stub results) are new ones written in the caller's dialect, so the list
   * is typed as the caller's. */
  messages: M[];
  tier: Tier;
  /** The audit record, or null when the view did not change (nothing was written). */
  record: CompactionRecord | null;
  /** Estimated tokens of the view before and after, tool schemas included (raw estimates: the
   * usage factor is not applied). */
  tokensBefore: number;
  tokensAfter: number;
  /** The view before and after as a fraction of the window, the figures the tiers are chosen
   * on: tool schemas included, the usage factor applied. */
  ratioBefore: number;
  ratioAfter: number;
  /** Every change the pairing repair made, in message order ([] when none); reported at every
   * tier, none included. */
  repairs: Repair[];
  /** The provider's prompt cache: tokens of the view that are a prefix of the view this
   * compactor returned before, and tokens of that earlier view after the prefix (billed
   * again); both 0 on the first. */
  cache: { prefixKept: number; prefixBroken: number };
}

export interface ReadEvidenceOptions {
  /** First line, from 0. Default 0. */
  offset?: number;
  /** Number of lines, at least 1. Default 200. */
  limit?: number;
}

export interface EvidenceHit {
  /** The tool-call id, the archive's "history:<first>-<end>" (or the evidence file's name). */
  ref: string;
  /** The line's number counted from 0, as readEvidence's offset: reading there lands on it. */
  line: number;
  /** The line, without its newline. */
  text: string;
  /** Only on the last entry of a search cut short at its work limit (about a second of
   * work): then ref is '', line 0 and text says why. */
  cut?: true;
}

/** An OpenAI tool call of read_evidence. */
export interface ReadEvidenceToolCall {
  id: string;
  type?: 'function';
  function: { name: 'read_evidence' | (string & {}); arguments: string | Record<string, unknown> };
}

/** An Anthropic tool_use block of read_evidence. */
export interface ReadEvidenceToolUse {
  type: 'tool_use';
  id: string;
  name: 'read_evidence' | (string & {});
  input: unknown;
}

export interface ReadEvidenceToolMessage {
  role: 'tool';
  tool_call_id: string;
  content: string;
}

export interface ReadEvidenceToolResult {
  type: 'tool_result';
  tool_use_id: string;
  content: string;
  /** Set when the core says the call could not be answered (bad arguments, unknown ref, bad
   * pattern). */
  is_error?: true;
}

/** One property of the read_evidence tool's JSON schema. */
export type ReadEvidenceProperty<T extends 'string' | 'integer'> = {
  type: T;
  description: string;
  /** The integers' lower bound (offset 0, limit 1). */
  minimum?: number;
};

/** The read_evidence tool's input schema (JSON Schema; every property optional). Type aliases,
 * not interfaces, so that they fit the SDKs' index-signature types (OpenAI FunctionParameters,
 * Anthropic Tool.InputSchema). */
export type ReadEvidenceSchema = {
  type: 'object';
  properties: {
    ref: ReadEvidenceProperty<'string'>;
    offset: ReadEvidenceProperty<'integer'>;
    limit: ReadEvidenceProperty<'integer'>;
    pattern: ReadEvidenceProperty<'string'>;
  };
};

/** The read_evidence tool in OpenAI's function shape (a ChatCompletionFunctionTool). */
export type OpenAIToolDefinition = {
  type: 'function';
  function: { name: 'read_evidence'; description: string; parameters: ReadEvidenceSchema };
};

/** The read_evidence tool in Anthropic's tool shape (an Anthropic Tool). */
export type AnthropicToolDefinition = {
  name: 'read_evidence';
  description: string;
  input_schema: ReadEvidenceSchema;
};

/**
 * One agent session's compactor. Before every model call, `await compact(history)` returns the
 * view to send; the history itself is never changed. One compaction at a time per compactor.
 * @throws {TypeError | RangeError} for a bad option, {InputError} CK_EINVAL when the thresholds
 * are not increasing.
 */
export class Compactor<B extends EvidenceBackend | undefined = undefined> {
  constructor(options: CompactorOptions<B>);

  /**
   * The view of `messages` to send now: at most the window, and after any compaction at most
   * soft x window (unless record.error says why not). Rejects with TypeError for bad arguments,
   * InputError for malformed messages, CtxkeelError CK_EOVERFLOW when the pinned messages and
   * the tool schemas alone do not fit the window (err.where says how many tokens they need),
   * CK_EBUSY while another compact() of this compactor is running, CK_ECLOSED after close(),
   * and an Error named 'AbortError' when `signal` aborts.
   * A failing, hanging or nonsensical summarizer never rejects: record.fallback says why. With
   * a TokenCounter estimator, rejects with what it threw (or the TypeError / RangeError for its
   * answer).
   */
  compact<M extends object>(
    messages: readonly M[],
    options?: CompactOptions<M> | null,
  ): Promise<CompactionResult<M>>;

  /**
   * Adds one message to this compactor's append-only session and returns the session's
   * length. The session keeps a frozen deep copy (plain objects and arrays are copied; class
   * instances, such as SDK messages, are kept as given and must not change afterwards), read by
   * the core at once, so that view() costs only what was appended since the last view().
   * @throws {TypeError} when `message` is not an object.
   * @throws {InputError} for a malformed message (`index` is its index in the session); it is
   * not added.
   * @throws {CtxkeelError} CK_EBUSY while a compact() or view() runs, CK_ECLOSED after close().
   */
  append(message: object): number;

  /** The messages appended so far: a frozen array of the session's frozen copies. */
  readonly session: readonly object[];

  /**
   * compact() of the append-only session: the view of the messages appended so far, whose
   * kept messages are the session's frozen copies. Options and errors as compact()'s.
   */
  view<M extends object = object>(options?: CompactOptions<M> | null):
    Promise<CompactionResult<M>>;

  /**
   * The tool-time gate: a new message with each tool result longer than toolOffloadThreshold
   * bytes stored and replaced by a placeholder, or the very same message when none is.
   */
  offload<M extends object>(message: M): WithBackend<B, M>;

  /**
   * Lines [offset, offset + limit) of an offloaded output, exactly as stored; '' past the end.
   * `ref` is a tool-call id or the path a placeholder states.
   * @throws {InputError} CK_EINVAL when there is no such evidence.
   * @throws {CtxkeelError} CK_EIO when the backend's get failed (the Promise rejects).
   * @throws {CtxkeelError} CK_EBUSY with a backend while another call of this compactor runs.
   */
  readEvidence(ref: string, options?: ReadEvidenceOptions | null): WithBackend<B, string>;

  /**
   * The lines matching `pattern` in one output, or in all of the session's when `ref` is null:
   * POSIX extended regular expressions as grep -E takes them, plus \\d \\w \\s \\b and
   * (?:...), matched case-sensitively on UTF-8 characters in time linear in the text. Always a
   * Promise: the search runs on the libuv pool. Without a backend the compactor stays usable
   * meanwhile, searches included; with one it is busy (CK_EBUSY) until the search is done.
   * Rejects with InputError CK_EINVAL for a bad pattern (backreferences are refused; `where`
   * is 'pattern') or an unknown ref, CtxkeelError CK_EIO when the store cannot be read.
   */
  searchEvidence(ref: string | null, pattern: string): Promise<EvidenceHit[]>;

  /**
   * Answers a model's read_evidence call ({ref, offset, limit} reads lines; {pattern} with or
   * without a ref searches) with the core's text; the model's mistakes come back as
   * explanatory content. @throws {TypeError | RangeError} when `call` is not a read_evidence
   * call.
   */
  handleReadEvidence(call: ReadEvidenceToolCall): WithBackend<B, ReadEvidenceToolMessage>;
  handleReadEvidence(call: ReadEvidenceToolUse): WithBackend<B, ReadEvidenceToolResult>;

  /**
   * The provider's prompt size for the last view returned; corrects later estimates. A number,
   * or the usage object as returned, of which the core counts the whole prompt: OpenAI Chat
   * (prompt_tokens) or Responses (input_tokens), Anthropic (input_tokens plus
   * cache_read_input_tokens and cache_creation_input_tokens), the AI SDK's usage / totalUsage
   * (inputTokens; v4 promptTokens), Gemini's usageMetadata (promptTokenCount), or a response
   * holding one under usage / usageMetadata.
   * @throws {CtxkeelError} CK_EINVAL naming the fields looked for, for any other shape.
   */
  observeUsage(usage: number | object): void;

  /** Forgets the session state (checkpoint, coverage, offloads) and the appended messages;
   * the audit log stays.
   * @throws {CtxkeelError} CK_EBUSY during a compact() (or, with a backend, another call). */
  reset(): void;

  /** Frees the native state now; every later call throws CK_ECLOSED. Safe to call twice. */
  close(): void;

  readonly closed: boolean;
  readonly sessionId: string;
  /** The correction factor learnt from observeUsage (1 until then). */
  readonly usageFactor: number;
  readonly options: ResolvedCompactorOptions;
}

/** The HTTP APIs HttpSummarizer speaks. */
export type HttpApi = 'openai' | 'anthropic';

export interface HttpSummarizerOptions {
  /** Required. 'openai': POST {baseUrl}/chat/completions, so an OpenAI-compatible server's
   * base URL usually ends in /v1 ('http://127.0.0.1:8000/v1'). 'anthropic': POST
   * {baseUrl}/v1/messages ('https://api.anthropic.com'; a base URL ending in /v1 is fine too). */
  baseUrl: string;
  /** Required: the model name sent with every request. */
  model: string;
  /** Default 'openai'. */
  api?: HttpApi;
  /**
   * The environment variable that holds the API key. null (the default) means OPENAI_API_KEY
   * or ANTHROPIC_API_KEY by `api`; '' means send no key. The key is read by the native code at
   * each call and never stored: it is sent as "Authorization: Bearer" (openai) or "x-api-key"
   * with "anthropic-version: 2023-06-01" (anthropic). It comes from the process environment:
   * inside a worker thread, a variable set only in the worker's own process.env is not seen.
   */
  apiKeyEnv?: string | null;
  /** Seconds for the whole call in (0, 86400]: every attempt, connecting included, and every
   * wait between attempts (a Retry-After that would pass it ends the call at once). Default 60. */
  timeout?: number;
  /** Attempts after the first, 0 to 20: connection errors, timeouts, 429 and 5xx are retried
   * (Retry-After is honoured), other 4xx are not. Default 3. */
  maxRetries?: number;
  /** Extra request headers, name -> value (one line each). null (the default) for none. */
  headers?: Record<string, string> | null;
  /** Seconds before the first retry, doubled each time with jitter, in (0, 3600]. Default 0.5. */
  backoff?: number;
  /** OpenAI API: true sends max_completion_tokens and no temperature, as OpenAI's reasoning
   * models require; false sends max_tokens and temperature 0. null (the default) decides by
   * the model name: o-series (o1, o3-mini, o4-mini...) and gpt-5 names are reasoning models.
   * Anthropic's API always gets max_tokens. */
  reasoningModel?: boolean | null;
  /** Fields added to every request body (JSON-serializable), replacing ctxkeel's of the same
   * name: { reasoning_effort: 'low' }, { temperature: 0.2 }. Must be a plain object (an array
   * or a string is refused with CK_EINVAL). null (the default) for none. */
  extraBody?: Record<string, unknown> | null;
}

/** What HttpSummarizer.summarize() sends; a compactor's SummaryRequest is one. */
export interface HttpSummaryRequest {
  /** The system prompt. Default ''. */
  system?: string;
  /** The user prompt. */
  prompt: string;
  /** The reply's budget in tokens, a positive integer. Default 1024. */
  maxTokens?: number;
}

/** Tokens the provider counted for one call. */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
}

/**
 * The built-in HTTP summarizer, for OpenAI-compatible servers and Anthropic's API:
 *
 *     const summarizer = new HttpSummarizer({ baseUrl, model });
 *     await compactor.compact(history, { summarize: summarizer });
 *
 * Each summary is one transfer on a libuv thread-pool thread; the event loop is never held.
 * Several may run at once (each holds a pool thread while it runs: the pool has 4 threads
 * unless UV_THREADPOOL_SIZE says otherwise). util.inspect shows the options, with header
 * names but not their values, and never the key.
 * @throws {TypeError | RangeError} naming the option that is wrong.
 */
export class HttpSummarizer implements SummarizerObject {
  constructor(options: HttpSummarizerOptions);

  /**
   * Asks the model; resolves with its reply text. Rejects with a CtxkeelError whose message is
   * a one-line reason (the HTTP status and the provider's message, never the key) and whose
   * code is CK_ESUMMARY (an HTTP error; a reply that is not JSON or holds no text),
   * CK_ETIMEDOUT (no complete reply within `timeout`), CK_EIO (no connection), CK_EINVAL (an
   * API key holding a line break or another control character: never sent),
   * CK_ECANCELED (the signal aborted: at once, while the transfer stops behind it; or close()),
   * CK_ECLOSED (after close()) or CK_ENOMEM; with TypeError / RangeError for bad arguments.
   */
  summarize(
    request: HttpSummaryRequest,
    context?: { signal?: AbortSignal | null } | null,
  ): Promise<string>;

  /** The provider's token counts for the last successful call (0 where it gave none), or null
   * before the first. */
  readonly lastUsage: TokenUsage | null;

  /** Whether requests send max_completion_tokens and no temperature (options.reasoningModel,
   * or the choice by the model name). */
  readonly reasoningModel: boolean;

  /** The number of transfers in flight. */
  readonly pending: number;

  /**
   * Cancels the transfers in flight and frees the native summarizer once they are over; later
   * summarize() calls reject with CK_ECLOSED. Safe to call twice. Call it before ending a
   * worker thread that has summaries in flight: Node waits for thread-pool work before it
   * tears a worker down, so worker.terminate() would otherwise wait for those transfers.
   */
  close(): void;

  readonly closed: boolean;
}

/** The read_evidence tool definition for a tool list. */
export function readEvidenceTool(format?: 'openai'): OpenAIToolDefinition;
export function readEvidenceTool(format: 'anthropic'): AnthropicToolDefinition;

/** The core library's version, "MAJOR.MINOR.PATCH". */
export const version: string;

/** Every status code of the core, by name. */
export const statusCodes: Readonly<Record<StatusName, StatusCode>>;

/** Base class of the errors ctxkeel throws. */
export class CtxkeelError extends globalThis.Error {
  /** The CK_E... name of the status. */
  code: StatusName;
  /** Index of the offending message, when known. */
  index?: number;
  /** The place in the input, such as "messages[3].tool_calls[0].id", when known. */
  where?: string;
  /** Byte offset into text, when known. */
  offset?: number;
}

/** Errors caused by bad input (CK_EINVAL, CK_ETYPE, CK_EMISSING, CK_EUTF8, CK_EFORMAT...). */
export class InputError extends CtxkeelError {}

export { CtxkeelError as Error };

/** Options of replay(): the compactor's plain options (no backend, counter or retention). */
export interface ReplayOptions {
  contextWindow: number;
  sessionId?: string;
  storeDir?: string;
  warn?: number;
  soft?: number;
  full?: number;
  emergency?: number;
  keepTail?: number;
  offloadThreshold?: number;
  toolOffloadThreshold?: number;
  summaryMaxTokens?: number;
  estimator?: Estimator;
  format?: Format;
  pinFirstUser?: boolean;
  promptCache?: PromptCache | null;
  cacheBreakpoints?: boolean;
  minGain?: number;
  /** Heads the chart. */
  title?: string;
}

/** One model call of a replay (ck_replay_row in ctxkeel.h). */
export interface ReplayRow {
  call: number;
  messages: number;
  viewMessages: number;
  /** The whole history: what would be sent without ctxkeel. */
  historyTokens: number;
  tokensBefore: number;
  /** The view sent. */
  tokensAfter: number;
  ratioBefore: number;
  ratioAfter: number;
  /** Tokens of the view that are a prefix of the call before's view. */
  prefixKept: number;
  /** Tokens of the call before's view after that prefix (re-sent or gone). */
  prefixBroken: number;
  tier: Tier;
  /** The compaction's number, 0 when the view needed no change. */
  compaction: number;
  summarized: number;
  offloaded: number;
  summaryCalls: number;
  summaryTokens: number;
  fallback: boolean;
  /** The CLI's action column. */
  action: string;
  /** A new checkpoint's text, else null. */
  checkpoint: string | null;
  /** The first output this call offloaded, as the view shows it, else null. */
  placeholder: string | null;
  record: CompactionRecord | null;
}

export interface ReplayTotals {
  calls: number;
  perTier: Record<Tier, number>;
  compactions: number;
  summaryCalls: number;
  summaryTokens: number;
  offloaded: number;
  tokensSent: number;
  tokensWithout: number;
  /** prefixKept summed over the calls: tokens a prompt cache can hold. */
  prefixKept: number;
  /** Calls whose view changed a message of the call before's. */
  prefixBreaks: number;
  peakRatio: number;
  peakRatioWithout: number;
  overWindowWithout: number;
  firstOverWithout: number;
}

export class Replay {
  readonly rows: ReplayRow[];
  readonly totals: ReplayTotals;
  readonly contextWindow: number;
  readonly sessionId: string;
  /** The chart as SVG text. */
  toSvg(): string;
}

/**
 * Feeds a recorded transcript to a new compactor as an agent loop would (before every assistant
 * message, and once after the last) and returns one row per model call. Synchronous; the
 * extractive summarizer writes the checkpoints.
 */
export function replay(
  messages: readonly object[] | { messages: readonly object[] } | string,
  options: ReplayOptions,
): Replay;
