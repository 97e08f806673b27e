// Chat Completions with the official openai SDK: a completion and its
// usage.cost, a stream (with the usage chunk) and a replay with the same
// Idempotency-Key.
import { sdk, base, apiKey, newKey, run } from './lib.mjs';

const { OpenAI } = sdk('openai');
const client = new OpenAI({ baseURL: base + '/api/v1', apiKey, maxRetries: 0 });
const params = { model: 'm', messages: [{ role: 'user', content: 'Say hello' }] };

run(async () => {
  const c = await client.chat.completions.create(params);
  const create = {
    id: c.id,
    text: c.choices[0].message.content,
    finish: c.choices[0].finish_reason,
    prompt_tokens: c.usage.prompt_tokens,
    completion_tokens: c.usage.completion_tokens,
    cost: c.usage.cost,
  };

  const s = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let cost = null;
  for await (const chunk of s) {
    const choice = chunk.choices[0];
    if (choice) {
      text += choice.delta?.content ?? '';
      finish = choice.finish_reason ?? finish;
    }
    if (chunk.usage) cost = chunk.usage.cost;
  }

  const opts = { headers: { 'Idempotency-Key': newKey() } };
  const first = await client.chat.completions.create(params, opts).withResponse();
  const again = await client.chat.completions.create(params, opts).withResponse();
  const replay = {
    first: first.data.id,
    again: again.data.id,
    first_replayed: first.response.headers.get('idempotency-replayed'),
    again_replayed: again.response.headers.get('idempotency-replayed'),
  };
  return { create, stream: { text, finish, cost }, replay };
});
