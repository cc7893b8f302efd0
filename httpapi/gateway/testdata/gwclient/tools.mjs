// Drives the official openai client, unchanged, against an agent whose
// provider answers with tool calls first (../../tools_node_test.go): the
// client sees only the final answer, plain and streamed.
// Usage: node tools.mjs BASE_URL API_KEY MODEL. Prints one JSON object.
import OpenAI from 'openai';

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20_000 });
const plain = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'add 2 and 40' }] });
const out = { plain: plain.choices[0].message.content, finish: plain.choices[0].finish_reason, deltas: [] };
const stream = await client.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'add 2 and 40' }] });
for await (const chunk of stream) {
  const c = chunk.choices[0];
  if (c?.delta?.content) out.deltas.push(c.delta.content);
}
process.stdout.write(JSON.stringify(out) + '\n');
