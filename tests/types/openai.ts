// OpenAI Chat Completions: the SDK's own message, tool and tool-call types go into ctxkeel and
// its results go back to client.chat.completions.create, without a cast (CommonJS types).
import OpenAI from 'openai';
import type {
  ChatCompletionMessageParam,
  ChatCompletionTool,
  ChatCompletionToolMessageParam,
} from 'openai/resources/chat/completions';
import {
  Compactor,
  HttpSummarizer,
  checkPairs,
  estimateTokens,
  readEvidenceTool,
  repairPairs,
  type CompactionResult,
  type SummaryRequest,
} from 'ctxkeel';

const client = new OpenAI();
const compactor = new Compactor({ contextWindow: 128_000 });

const tools: ChatCompletionTool[] = [
  {
    type: 'function',
    function: { name: 'run', description: 'runs a command', parameters: { type: 'object' } },
  },
  readEvidenceTool(),
  readEvidenceTool('openai'),
];

export async function turn(history: ChatCompletionMessageParam[]): Promise<string | null> {
  history.push({ role: 'developer', content: 'Be brief.' });
  const view = await compactor.compact(history, {
    tools,
    summarize: async (request: SummaryRequest<ChatCompletionMessageParam>) => {
      const reply = await client.chat.completions.create({
        model: 'gpt-5-mini',
        messages: [
          { role: 'developer', content: request.system },
          ...request.messages,
          { role: 'user', content: request.prompt },
        ],
        max_completion_tokens: request.maxTokens,
      });
      return reply.choices[0]?.message.content ?? '';
    },
  });
  const kept: ChatCompletionMessageParam[] = view.messages;
  const response = await client.chat.completions.create({
    model: 'gpt-5-mini',
    messages: view.messages,
    tools,
  });
  compactor.observeUsage(response.usage ?? 0);
  const message = response.choices[0]?.message;
  if (!message) return null;
  history.push(message);
  for (const call of message.tool_calls ?? []) {
    if (call.type === 'function' && call.function.name === 'read_evidence') {
      const answer: ChatCompletionToolMessageParam = compactor.handleReadEvidence(call);
      history.push(answer);
    }
  }
  return kept.length > 0 ? message.content : null;
}

// The other functions take the same lists, readonly ones included.
export function checks(history: readonly ChatCompletionMessageParam[]): number {
  const repaired: ChatCompletionMessageParam[] = repairPairs(history);
  const offloaded: ChatCompletionMessageParam = compactor.offload(repaired[0] ?? { role: 'user', content: '' });
  return checkPairs(history).length + estimateTokens(history) + estimateTokens(tools) +
    estimateTokens(offloaded);
}

// HttpSummarizer is a summarizer for any dialect.
export function withHttp(history: ChatCompletionMessageParam[]): Promise<CompactionResult<ChatCompletionMessageParam>> {
  const summarizer = new HttpSummarizer({ baseUrl: 'https://api.openai.com/v1', model: 'gpt-5-mini' });
  return compactor.compact(history, { summarize: summarizer });
}

// The append-only session: the host appends each message once and sends the view.
export async function sessionTurn(message: ChatCompletionMessageParam): Promise<number> {
  const length: number = compactor.append(message);
  const view = await compactor.view<ChatCompletionMessageParam>({ tools });
  await client.chat.completions.create({ model: 'gpt-5-mini', messages: view.messages, tools });
  return length + compactor.session.length;
}
