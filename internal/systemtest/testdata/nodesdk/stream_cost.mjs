// Where each official Node SDK's stream helper leaves the gateway's
// usage.cost: the accumulated answer (Anthropic's finalMessage(), OpenAI's
// finalChatCompletion() and finalResponse()) beside the raw event that
// carries it (Anthropic's message_delta).
import { sdk, base, apiKey, run } from './lib.mjs';

const { Anthropic } = sdk('@anthropic-ai/sdk');
const { OpenAI } = sdk('openai');
const anthropic = new Anthropic({ baseURL: base + '/api', apiKey, maxRetries: 0 });
const openai = new OpenAI({ baseURL: base + '/api/v1', apiKey, maxRetries: 0 });

run(async () => {
  const s = anthropic.messages.stream({ model: 'm', max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] });
  let deltaCost = null;
  s.on('streamEvent', (e) => { if (e.type === 'message_delta') deltaCost = e.usage.cost ?? null; });
  const m = await s.finalMessage();
  const messages = { final_cost: m.usage.cost ?? null, delta_cost: deltaCost };

  const c = await openai.chat.completions.stream({
    model: 'm', stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Hi' }],
  }).finalChatCompletion();
  const r = await openai.responses.stream({ model: 'm', input: 'Hi' }).finalResponse();
  return { messages, chat_final_cost: c.usage.cost ?? null, responses_final_cost: r.usage.cost ?? null };
});
