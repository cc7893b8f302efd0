// Drives the official openai client, unchanged, against the agent gateway's
// models, chat-completions and responses endpoints, for ../../node_test.go.
// Usage: node client.mjs BASE_URL API_KEY. Prints one JSON object.
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20_000 });
const out = {};

const models = [];
for await (const m of client.models.list()) models.push(m.id);
out.models = models;

const plain = await client.chat.completions.create({
  model: 'gateway:default',
  messages: [{ role: 'user', content: 'hello' }],
});
out.chat = { id: plain.id, content: plain.choices[0].message.content, total: plain.usage.total_tokens };

const stream = await client.chat.completions.create({
  model: 'gateway:default',
  messages: [{ role: 'user', content: 'stream please' }],
  stream: true,
  stream_options: { include_usage: true },
});
out.chatStream = { deltas: [], usage: null, finish: null };
for await (const chunk of stream) {
  const c = chunk.choices[0];
  if (c?.delta?.content) out.chatStream.deltas.push(c.delta.content);
  if (c?.finish_reason) out.chatStream.finish = c.finish_reason;
  if (chunk.usage) out.chatStream.usage = chunk.usage.total_tokens;
}

const resp = await client.responses.create({ model: 'gateway:default', input: 'hi' });
out.responses = { id: resp.id, status: resp.status, text: resp.output_text, total: resp.usage.total_tokens };

const rstream = await client.responses.create({ model: 'gateway:default', input: 'stream it', stream: true });
out.responsesStream = { types: [], text: '', status: null };
for await (const ev of rstream) {
  out.responsesStream.types.push(ev.type);
  if (ev.type === 'response.delta') out.responsesStream.text += ev.delta;
  if (ev.type === 'response.done') out.responsesStream.status = ev.response.status;
}

try {
  await client.chat.completions.create({ model: 'gateway:nobody', messages: [{ role: 'user', content: 'x' }] });
  out.missing = 'accepted';
} catch (err) {
  out.missing = { status: err.status, code: err.code, type: err.type };
}
try {
  const bad = new OpenAI({ baseURL, apiKey: 'gateway_0123456789abcdef0123456789abcdef', maxRetries: 0 });
  await bad.chat.completions.create({ model: 'gateway:default', messages: [{ role: 'user', content: 'x' }] });
  out.badKey = 'accepted';
} catch (err) {
  out.badKey = { status: err.status, code: err.code, type: err.type };
}
process.stdout.write(JSON.stringify(out) + '\n');
