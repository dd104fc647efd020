// ctxkeel/openai-agents: the OpenAI Agents SDK's callModelInputFilter (see
// node/integrations/openai-agents.js).
import type { CompactionResult } from '../index';
import type { AdapterOptions, AnyCompactor } from './common';

export type { AnyCompactor, AdapterOptions, AdapterSummarize, AdapterSummaryRequest } from './common';

/** The SDK's ModelInputData: the input items (I is the SDK's AgentInputItem) and the
 * instructions. */
export interface ModelInput<I> {
  input: I[];
  instructions?: string;
}

/** A callModelInputFilter; lastResult is the CompactionResult of the latest model call. */
export interface CompactionInputFilter {
  <I extends object>(args: { modelData: ModelInput<I> }): Promise<ModelInput<I>>;
  /** Always true: the filter never changes the SDK's items. */
  preserveInputIdentity: boolean;
  lastResult: CompactionResult | null;
}

/** callModelInputFilter(compactor, options): compacts the input of every model call. */
export declare function callModelInputFilter(
  compactor: AnyCompactor,
  options?: AdapterOptions<object>,
): CompactionInputFilter;
