// Drives the official openai client against gatehouse's proxy, for
// ../../proxy_openai_test.go. Usage: node client.mjs BASE_URL API_KEY
// Prints one JSON object per line: {"first": ...} as soon as the first
// streamed chunk arrives (the test then lets the upstream finish), then
// {"result": ...}.
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20_000 });
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const result = {};

const plain = await client.chat.completions.create({
  model: 'stub-model',
  messages: [{ role: 'user', content: 'hello' }],
});
result.completion = plain.choices[0].message.content;
result.usage = plain.usage.total_tokens;

const models = await client.models.list();
result.models = models.data.map((m) => m.id);

const stream = await client.chat.completions.create({
  model: 'stub-model',
  messages: [{ role: 'user', content: 'count' }],
  stream: true,
});
result.deltas = [];
for await (const chunk of stream) {
  const delta = chunk.choices[0]?.delta?.content ?? '';
  if (result.deltas.length === 0) say({ first: delta });
  result.deltas.push(delta);
  result.finish = chunk.choices[0]?.finish_reason ?? result.finish;
}

const raw = await client.chat.completions
  .create({ model: 'stub-model', messages: [{ role: 'user', content: 'headers' }] })
  .withResponse();
result.rateLimitLimit = raw.response.headers.get('x-ratelimit-limit');

try {
  const bad = new OpenAI({ baseURL, apiKey: 'svc_live_0123456789abcdef0123456789abcdef', maxRetries: 0 });
  await bad.models.list();
  result.badKey = 'accepted';
} catch (err) {
  result.badKey = err.status;
}
say({ result });
