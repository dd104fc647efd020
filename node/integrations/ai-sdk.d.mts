export * from './ai-sdk.js';
