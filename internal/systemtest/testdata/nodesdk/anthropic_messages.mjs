// The Messages API with the official @anthropic-ai/sdk (base URL
// <host>/api): a message, a stream's finalMessage(), a keyed request and its
// replay with the SDK's own retries on (maxRetries: 2), and a changed body
// with the same key, which must raise a 409 (ConflictError) that the SDK does
// not retry (the gateway sends x-should-retry: false). A fetch wrapper counts
// the HTTP requests the retrying client makes.
import { sdk, base, apiKey, newKey, run, caught } from './lib.mjs';

const { Anthropic, ConflictError } = sdk('@anthropic-ai/sdk');
const client = new Anthropic({ baseURL: base + '/api', apiKey, maxRetries: 0 });
let sent = 0;
const counting = (...args) => { sent++; return fetch(...args); };
const retrying = new Anthropic({ baseURL: base + '/api', apiKey, maxRetries: 2, fetch: counting });
const params = (maxTokens = 64) => ({
  model: 'm',
  max_tokens: maxTokens,
  system: 'Be brief.',
  messages: [{ role: 'user', content: 'Say hello' }],
});

run(async () => {
  const m = await client.messages.create(params());
  const create = {
    id: m.id,
    type: m.type,
    role: m.role,
    text: m.content[0].text,
    stop_reason: m.stop_reason,
    input_tokens: m.usage.input_tokens,
    output_tokens: m.usage.output_tokens,
    cost: m.usage.cost,
  };

  let deltas = '';
  const s = client.messages.stream(params());
  s.on('text', (t) => { deltas += t; });
  const f = await s.finalMessage();
  const stream = { deltas, text: f.content[0].text, stop_reason: f.stop_reason, output_tokens: f.usage.output_tokens };

  const opts = { headers: { 'Idempotency-Key': newKey() } };
  const first = await retrying.messages.create(params(), opts).withResponse();
  const again = await retrying.messages.create(params(), opts).withResponse();
  const replay = {
    first: first.data.id,
    again: again.data.id,
    again_replayed: again.response.headers.get('idempotency-replayed'),
    requests: sent,
  };

  const conflict = await caught(() => retrying.messages.create(params(65), opts), ConflictError);
  conflict.requests = sent - replay.requests;
  return { create, stream, replay, conflict };
});
