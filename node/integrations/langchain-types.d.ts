// The declarations of ctxkeel/langchain that name no LangChain type: langchain.d.ts (CommonJS)
// and langchain.d.mts (ESM) each fill them with LangChain's types as that mode resolves them.
import type { CompactionResult } from '../index';
import type { AdapterOptions, AdapterSummarize } from './common';

/** Any LangChain chat model: asked for the checkpoint with invoke(). */
export interface ChatModelLike {
  invoke(input: Array<[string, string]>, options?: { signal?: AbortSignal }): PromiseLike<unknown>;
}

export interface LangChainAdapterOptions<M> extends Omit<AdapterOptions<M>, 'summarize'> {
  /** A function, an HttpSummarizer, or a LangChain chat model; the summary request's
   * messages are the state's own message objects. */
  summarize?: AdapterSummarize<M> | ChatModelLike | null;
}

/** createAgent's middleware; lastResult is the CompactionResult of the latest model call. */
export type CompactionMiddleware<T> = T & { lastResult: CompactionResult | null };

/** createReactAgent's preModelHook: the view as llmInputMessages. */
export interface PreModelHook<M> {
  (state: { messages: M[] }): Promise<{ llmInputMessages: M[] }>;
  lastResult: CompactionResult | null;
}
