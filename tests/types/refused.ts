// Wrong uses the declarations refuse: each line below must be a type error (tsc reports an
// unused @ts-expect-error as an error itself, so a declaration that grew too loose fails here).
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { MessageParam, Tool } from '@anthropic-ai/sdk/resources/messages';
import { Compactor, checkPairs, estimateTokens, readEvidenceTool, replay } from 'ctxkeel';

declare const openai: ChatCompletionMessageParam[];
declare const anthropic: MessageParam[];
const compactor = new Compactor({ contextWindow: 8_000 });

export async function wrong(): Promise<void> {
  // @ts-expect-error a message list must be an array of objects, not a string
  await compactor.compact('hello');
  // @ts-expect-error nor an array of strings
  await compactor.compact(['hello']);
  // @ts-expect-error nor an array of numbers
  checkPairs([1, 2]);
  // @ts-expect-error the result keeps the caller's dialect: OpenAI in, not Anthropic out
  const back: MessageParam[] = (await compactor.compact(openai)).messages;
  // @ts-expect-error tools are objects
  await compactor.compact(anthropic, { tools: ['read_evidence'] });
  // @ts-expect-error the summarizer returns text
  await compactor.compact(openai, { summarize: () => 42 });
  // @ts-expect-error the request's messages are the caller's type
  await compactor.compact(openai, { summarize: (r: { messages: MessageParam[] }) => String(r) });
  // @ts-expect-error the OpenAI tool shape is not an Anthropic Tool
  const tool: Tool = readEvidenceTool();
  // @ts-expect-error only the two tool formats exist
  readEvidenceTool('gemini');
  // @ts-expect-error contextWindow is required
  new Compactor({});
  // @ts-expect-error without a backend, readEvidence answers a string, not a Promise
  const text: Promise<string> = compactor.readEvidence('call_1');
  // @ts-expect-error estimateTokens does not take numbers
  estimateTokens(12);
  // @ts-expect-error replay takes a transcript, not a compactor
  replay(compactor, { contextWindow: 8_000 });
  void back; void tool; void text;
}
