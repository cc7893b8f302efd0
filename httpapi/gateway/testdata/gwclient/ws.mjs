// Drives the gateway's WebSocket RPC with the ws npm client, as a user's
// program would: node ws.mjs <ws-url> <admin-token> <read-key>. Prints one
// JSON object with what it saw.
import WebSocket from 'ws';

const [url, adminToken, readKey] = process.argv.slice(2);

function session(token, extra = {}) {
  const ws = new WebSocket(url);
  let next = 0;
  const waiting = new Map();
  const events = new Map();
  ws.on('message', (m) => {
    const f = JSON.parse(m);
    if (f.type === 'event') {
      if (!events.has(f.id)) events.set(f.id, []);
      events.get(f.id).push(f);
      return;
    }
    const w = waiting.get(f.id);
    if (w) { waiting.delete(f.id); w({ ...f, events: events.get(f.id) ?? [] }); }
  });
  const call = (method, params) => new Promise((resolve) => {
    const id = String(++next);
    waiting.set(id, resolve);
    ws.send(JSON.stringify({ type: 'req', id, method, params }));
  });
  const open = new Promise((resolve, reject) => { ws.on('open', resolve); ws.on('error', reject); });
  return { ws, call, connect: async () => { await open; return call('connect', { token, ...extra }); } };
}

const out = {};
const admin = session(adminToken, { user_id: 'alice' });
const hello = await admin.connect();
out.connect = { ok: hello.ok, role: hello.payload?.role, user: hello.payload?.user_id };
const list = await admin.call('agents.list');
out.agents = (list.payload?.data ?? []).map((a) => a.agent_key);
const chat = await admin.call('chat.completions', {
  model: 'gateway:default', stream: true, messages: [{ role: 'user', content: 'hello over websocket' }],
});
out.stream = {
  ok: chat.ok,
  text: chat.events.map((e) => e.payload?.choices?.[0]?.delta?.content ?? '').join(''),
  events: chat.events.length,
};

// A session: chat.send streams chunk events, then the answer; history,
// the session list, and abort of a slow turn.
const turn = await admin.call('chat.send', { agentId: 'default', sessionKey: 'n1', message: 'node says hi', stream: true });
out.session = {
  ok: turn.ok,
  content: turn.payload?.content,
  chunks: turn.events.filter((e) => e.event === 'chat' && e.payload?.kind === 'chunk').length,
  runEvents: turn.events.filter((e) => e.event === 'agent').map((e) => e.payload?.kind),
};
const hist = await admin.call('chat.history', { sessionKey: 'n1' });
out.session.history = (hist.payload?.messages ?? []).length;
const page = await admin.call('sessions.list', { limit: 10 });
out.session.listed = page.payload?.total;
const slow = admin.call('chat.send', { agentId: 'slow', sessionKey: 'n2', message: 'a b c d e f g h i j', stream: true });
await new Promise((r) => setTimeout(r, 150));
const abort = await admin.call('chat.abort', { sessionKey: 'n2' });
const aborted = await slow;
out.abort = { ok: abort.ok, sendOk: aborted.ok, code: aborted.error?.code };
admin.ws.close();

const reader = session(readKey, { locale: 'zh' });
await reader.connect();
const denied = await reader.call('providers.create', { name: 'x', provider_type: 'echo' });
out.denied = { ok: denied.ok, code: denied.error?.code, message: denied.error?.message };
reader.ws.close();
process.stdout.write(JSON.stringify(out));
