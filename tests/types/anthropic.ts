// Anthropic Messages: MessageParam[] into ctxkeel and the view back to client.messages.create,
// the read_evidence tool in the SDK's own tool list, its calls answered as tool_result blocks.
import Anthropic from '@anthropic-ai/sdk';
import type {
  MessageParam,
  Tool,
  ToolResultBlockParam,
  ToolUnion,
} from '@anthropic-ai/sdk/resources/messages';
import { Compactor, readEvidenceTool, type EvidenceBackend } from 'ctxkeel';

const client = new Anthropic();
const store = new Map<string, string>();
const backend: EvidenceBackend = {
  put: (key, text) => void store.set(key, text),
  get: async (key) => store.get(key),
};
const compactor = new Compactor({ contextWindow: 200_000, format: 'anthropic', backend });

const evidenceTool: Tool = readEvidenceTool('anthropic');
const tools: ToolUnion[] = [evidenceTool, { name: 'bash', input_schema: { type: 'object' } }];

export async function turn(history: MessageParam[]): Promise<void> {
  const view = await compactor.compact(history, {
    tools,
    summarize: async (request) => {
      const reply = await client.messages.create({
        model: 'claude-sonnet-4-5',
        max_tokens: request.maxTokens,
        system: request.system,
        messages: [...request.messages, { role: 'user', content: request.prompt }],
      });
      const first = reply.content[0];
      return first?.type === 'text' ? first.text : '';
    },
  });
  const response = await client.messages.create({
    model: 'claude-sonnet-4-5',
    max_tokens: 4096,
    messages: view.messages,
    tools,
  });
  compactor.observeUsage(response.usage);
  history.push({ role: response.role, content: response.content });
  const results: ToolResultBlockParam[] = [];
  for (const block of response.content) {
    if (block.type === 'tool_use' && block.name === 'read_evidence') {
      results.push(await compactor.handleReadEvidence(block));
    }
  }
  if (results.length > 0) history.push({ role: 'user', content: results });
  // With a backend, offload() answers with a Promise of the caller's own type.
  const last = history[history.length - 1];
  if (last) {
    const offloaded: MessageParam = await compactor.offload(last);
    history[history.length - 1] = offloaded;
  }
}
