// Types the framework adapters share (ctxkeel/ai-sdk, ctxkeel/langchain, ctxkeel/openai-agents).
import type { Compactor, EvidenceBackend } from '../index';

/** A compactor, with or without an evidence backend. */
export type AnyCompactor = Compactor<undefined> | Compactor<EvidenceBackend>;

/** What a summarizer given to an adapter is asked: the core's summary request, its
 * `messages` the host's own objects (LangChain message objects, the Agents SDK's items). */
export interface AdapterSummaryRequest<M> {
  system: string;
  prompt: string;
  maxTokens: number;
  tier: 'none' | 'warn' | 'soft' | 'full' | 'emergency';
  messages: M[];
  previous: string | null;
}

/** A checkpoint writer: a function returning the text or a Promise of it, or an object with
 * a summarize method (an HttpSummarizer). */
export type AdapterSummarize<M> =
  | ((request: AdapterSummaryRequest<M>, context: { signal: AbortSignal }) =>
      string | PromiseLike<string>)
  | { summarize(request: never, context: { signal: AbortSignal }): string | PromiseLike<string> };

/** compact()'s per-call options, passed on to every compaction the adapter makes. */
export interface AdapterOptions<M> {
  /** Writes the checkpoint; absent or null: the built-in extractive summarizer. */
  summarize?: AdapterSummarize<M> | null;
  /** The tool schemas sent with each request (JSON objects), to count them. */
  tools?: readonly object[] | null;
  /** Aborting rejects the compaction (and so the framework's model call). */
  signal?: AbortSignal | null;
}
