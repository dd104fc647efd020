// ctxkeel/langchain (CommonJS types): LangChain.js createAgent middleware and LangGraph.js
// createReactAgent's pre-model hook (see node/integrations/langchain.js).
import type { AgentMiddleware } from 'langchain';
import type { BaseMessage } from '@langchain/core/messages';
import type { AnyCompactor } from './common';
import type { CompactionMiddleware, LangChainAdapterOptions, PreModelHook } from './langchain-types';

export type * from './langchain-types';
export type { AnyCompactor, AdapterOptions, AdapterSummarize, AdapterSummaryRequest } from './common';

/** compactionMiddleware(compactor, options): compacts every model call of createAgent. */
export declare function compactionMiddleware(compactor: AnyCompactor,
  options?: LangChainAdapterOptions<BaseMessage>): CompactionMiddleware<AgentMiddleware>;
/** preModelHook(compactor, options): compacts the state's messages before every model call. */
export declare function preModelHook(compactor: AnyCompactor,
  options?: LangChainAdapterOptions<BaseMessage>): PreModelHook<BaseMessage>;
/** A message as the core's 'langchain' dialect reads it: its toDict() form. */
export declare function toDict(message: BaseMessage | object): object;
