export * from './openai-agents.js';
