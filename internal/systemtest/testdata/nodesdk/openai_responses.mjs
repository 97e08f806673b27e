// The Responses API with the official openai SDK: a response (output_text,
// usage.cost), a stream read until response.completed, a continuation with
// previous_response_id and an unknown previous_response_id (400).
import { sdk, base, apiKey, run, caught } from './lib.mjs';

const { OpenAI, BadRequestError } = sdk('openai');
const client = new OpenAI({ baseURL: base + '/api/v1', apiKey, maxRetries: 0 });
const params = (input) => ({ model: 'm', input, instructions: 'Be brief.' });

run(async () => {
  const r = await client.responses.create(params('Say hello'));
  const create = { id: r.id, status: r.status, text: r.output_text, output_tokens: r.usage.output_tokens, cost: r.usage.cost };

  const s = await client.responses.create({ ...params('Stream it'), stream: true });
  const types = [];
  let text = '';
  let completed = null;
  const seq = [];
  for await (const ev of s) {
    types.push(ev.type);
    seq.push(ev.sequence_number);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed') {
      // output_text is a convenience of create(), not of the event's response.
      const text = ev.response.output.flatMap((o) => o.content ?? []).filter((p) => p.type === 'output_text').map((p) => p.text).join('');
      completed = { status: ev.response.status, text, output_tokens: ev.response.usage.output_tokens };
      break;
    }
  }

  const n = await client.responses.create({ ...params('And again'), previous_response_id: r.id });
  const next = { id: n.id, previous: n.previous_response_id, text: n.output_text };

  const unknown = await caught(() => client.responses.create({ ...params('x'), previous_response_id: 'resp_unknown' }), BadRequestError);
  return { create, stream: { types, seq, text, completed }, next, unknown };
});
