// LangChain.js: BaseMessage-derived class instances through ctxkeel and into a chat model's
// invoke, and the read_evidence tool bound to the model.
import type { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { Compactor, readEvidenceTool } from 'ctxkeel';

declare const model: BaseChatModel;
const compactor = new Compactor({ contextWindow: 128_000, format: 'langchain' });

export async function run(task: string): Promise<BaseMessage[]> {
  const history: BaseMessage[] = [new SystemMessage('You are terse.'), new HumanMessage(task)];
  const bound = model.bindTools?.([readEvidenceTool()]) ?? model;
  const view = await compactor.compact(history, { tools: [readEvidenceTool()] });
  const reply = await bound.invoke(view.messages);
  history.push(reply);
  const human: HumanMessage[] = (await compactor.compact([new HumanMessage('hi')])).messages;
  const mixed = await compactor.compact([new AIMessage('done'), new ToolMessage({ content: 'x', tool_call_id: 'a' })]);
  return [...history, ...human, ...mixed.messages];
}
