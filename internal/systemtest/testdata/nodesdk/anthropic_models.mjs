// Anthropic's Models API and token counting with the official
// @anthropic-ai/sdk (base URL <host>/api), the key in x-api-key alone (as
// Claude Code and earlier SDK versions send it; this version sends its
// apiKey as a bearer token, which one call uses too): models.list() paged
// one by one and whole, models.retrieve() of a model whose id has a slash
// and of an unknown one (NotFoundError), messages.countTokens() forwarded to
// the Anthropic upstream, beta.messages.countTokens() (an anthropic-beta
// header, and ?beta=true as Claude Code sends it), and a count the gateway
// estimates. A fetch wrapper records each request's method, path and key
// headers.
import { sdk, base, apiKey, run, caught } from './lib.mjs';

const { Anthropic, NotFoundError } = sdk('@anthropic-ai/sdk');
const requests = [];
const recording = (url, init) => {
  const h = new Headers(init?.headers);
  const u = new URL(url);
  requests.push(`${init?.method ?? 'GET'} ${u.pathname}${u.search} authorization=${h.get('authorization') ?? ''} x-api-key=${h.get('x-api-key') ?? ''}`);
  return fetch(url, init);
};
const client = new Anthropic({
  baseURL: base + '/api', apiKey: null, authToken: null, defaultHeaders: { 'x-api-key': apiKey }, maxRetries: 0, fetch: recording,
});
const bearer = new Anthropic({ baseURL: base + '/api', apiKey, maxRetries: 0, fetch: recording });
const params = { model: 'm', system: 'Be brief.', messages: [{ role: 'user', content: 'Say hello' }] };
const counted = ({ data, response }) => ({
  input_tokens: data.input_tokens,
  provider: response.headers.get('x-gateway-provider'),
  estimated: response.headers.get('x-gateway-estimated'),
});

run(async () => {
  const paged = [];
  for await (const m of client.models.list({ limit: 1 })) paged.push(m.id);
  const first = await client.models.list();
  const page = { ids: first.data.map((m) => m.id), has_more: first.has_more, first_id: first.first_id, last_id: first.last_id };
  const m = await client.models.retrieve('vendor/b');
  const one = { id: m.id, type: m.type, display_name: m.display_name, created_at: m.created_at, lifecycle: m.lifecycle };
  const missing = await caught(() => client.models.retrieve('nope'), NotFoundError);
  const count = counted(await client.messages.countTokens(params).withResponse());
  // Claude Code adds ?beta=true to the beta endpoints' paths.
  const beta = counted(await client.beta.messages.countTokens({ ...params, betas: ['token-counting-2024-11-01'] }, { query: { beta: 'true' } }).withResponse());
  const estimate = counted(await bearer.messages.countTokens({ ...params, model: 'vendor/b' }).withResponse());
  return { paged, page, one, missing, count, beta, estimate, requests };
});
