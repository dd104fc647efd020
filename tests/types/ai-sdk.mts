// The Vercel AI SDK: ModelMessage[] through ctxkeel in prepareStep and into generateText, with
// the ESM declarations (node/index.d.mts), named and default imports.
import { generateText, type LanguageModel, type ModelMessage } from 'ai';
import ctxkeel, { Compactor, type CompactionResult } from 'ctxkeel';

declare const model: LanguageModel;
const compactor = new Compactor({ contextWindow: 128_000, format: 'ai-sdk' });

export async function run(history: ModelMessage[]): Promise<string> {
  const first: CompactionResult<ModelMessage> = await compactor.compact(history);
  const result = await generateText({
    model,
    messages: first.messages,
    prepareStep: async ({ messages }) => {
      const view = await compactor.compact(messages);
      return { messages: view.messages };
    },
  });
  compactor.observeUsage(result.totalUsage);
  const again: ModelMessage[] = ctxkeel.repairPairs(result.response.messages);
  return again.length > 0 ? result.text : '';
}
