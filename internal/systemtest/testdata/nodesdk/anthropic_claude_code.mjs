// Claude Code's recorded second turn (testdata/agents: thinking blocks with
// their signature sent back, cache_control, a system entry inside messages,
// output_config, context_management, twelve tools), sent with the official
// @anthropic-ai/sdk through its beta Messages API as Claude Code sends it
// (?beta=true, anthropic-beta), streamed and not. A fetch wrapper keeps the
// bodies the SDK put on the wire, for the test to compare with what reached
// the upstream.
import { readFileSync } from 'node:fs';
import { sdk, base, apiKey, run } from './lib.mjs';

const { Anthropic } = sdk('@anthropic-ai/sdk');
const fixture = JSON.parse(readFileSync(new URL('../agents/claude-code-2.1.328-turn2.json', import.meta.url)));
const sent = [];
const recording = (url, init) => {
  sent.push({ url: String(url), body: init.body, beta: new Headers(init.headers).get('anthropic-beta') });
  return fetch(url, init);
};
const client = new Anthropic({ baseURL: base + '/api', apiKey, maxRetries: 0, fetch: recording });
const { model, stream, ...rest } = fixture.body;
const betas = fixture.headers['anthropic-beta'].split(',');
const params = { ...rest, model: 'm', betas };

run(async () => {
  const events = [];
  const s = client.beta.messages.stream(params);
  for await (const ev of s) {
    events.push(ev.type + (ev.delta ? ':' + ev.delta.type : '') + (ev.content_block ? ':' + ev.content_block.type : ''));
  }
  const f = await s.finalMessage();
  // The SDK refuses a long max_tokens without a stream: a smaller one here.
  const m = await client.beta.messages.create({ ...params, max_tokens: 1024, stream: false });
  const blocks = (msg) => msg.content.map((b) => ({ type: b.type, text: b.text ?? null, thinking: b.thinking ?? null, signature: b.signature ?? null, input: b.input ?? null }));
  return {
    sent,
    events,
    streamed: { blocks: blocks(f), stop_reason: f.stop_reason, usage: f.usage },
    created: { blocks: blocks(m), stop_reason: m.stop_reason, usage: m.usage },
  };
});
