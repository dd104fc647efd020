// ctxkeel/ai-sdk: the AI SDK's prepareStep (see node/integrations/ai-sdk.js).
import type { CompactionResult } from '../index';
import type { AdapterOptions, AnyCompactor } from './common';

export type { AnyCompactor, AdapterOptions, AdapterSummarize, AdapterSummaryRequest } from './common';

/** A prepareStep function for generateText / streamText; lastResult is the latest step's
 * CompactionResult. M is the SDK's ModelMessage. */
export interface CompactStep {
  <M extends object>(step: { messages: M[] }): Promise<{ messages: M[] }>;
  lastResult: CompactionResult | null;
}

/** compactStep(compactor, options): `prepareStep` that compacts every step's messages. */
export declare function compactStep(
  compactor: AnyCompactor,
  options?: AdapterOptions<object>,
): CompactStep;
