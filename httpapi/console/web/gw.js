// gatehouse console, the agent gateway's pages: every call goes through
// the bridge below /api/gateway on this origin, with the session cookie
// (the gateway's GET /v1/agents is GET /api/gateway/v1/agents here), and
// chat through the gateway's WebSocket RPC at /api/gateway/ws, which the
// session authenticates. The page never holds a gateway credential: a
// console user is a gateway user (their gateway user id is their console
// user id); a console admin acts as a gateway admin and sees every user's
// data. The "Tokens" page (management access tokens, /api/tokens) lives
// here too. Everything user-supplied is inserted as text.

import {
  h, fill, api, APIError, go, when, guarded, onSubmit, errorBox, confirmDialog, revealPanel, page,
  every, onLeave,
} from './app.js';

const GW = '/api/gateway/v1';
const gw = (method, path, body) => api(method, GW + path, body);
const q = (params) => {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v != null) s.set(k, v);
  const t = s.toString();
  return t ? '?' + t : '';
};
const isAdmin = (me) => me.role === 'admin';
const num = (n) => Number(n || 0).toLocaleString();
const ms = (d) => (d >= 1000 ? (d / 1000).toFixed(2) + ' s' : `${d} ms`);

// gatewayNav is the main menu's gateway part.
export function gatewayNav(me) {
  return [
    h('a', { href: '#/agents' }, 'Agents'),
    h('a', { href: '#/sessions' }, 'Sessions'),
    h('a', { href: '#/traces' }, 'Traces'),
    h('a', { href: '#/usage' }, 'Usage'),
    isAdmin(me) ? h('a', { href: '#/gw', id: 'nav-gateway-admin' }, 'Gateway admin') : null,
  ];
}

// people maps console user ids (gateway user ids) to emails, for admins
// (GET /api/users); person shows a user id as "me", an email or the id.
let people = new Map();
let self = null;
function person(id) {
  if (!id) return '—';
  if (id === self) return 'me';
  return people.get(id) || h('code', {}, id);
}

// gatewayRoute renders path if it is a gateway page; false if not.
export async function gatewayRoute(route, me) {
  const path = route.split('?')[0];
  self = me.id;
  people = new Map();
  if (isAdmin(me) && !/^\/(tokens|chat\/)/.test(path)) {
    try { people = new Map((await api('GET', '/api/users')).users.map((u) => [u.id, u.email])); } catch { /* ids then */ }
  }
  let m;
  if (path === '/agents') await agentsPage(me);
  else if ((m = path.match(/^\/agents\/([0-9a-f-]{36})$/))) await agentPage(me, m[1]);
  else if ((m = path.match(/^\/chat\/([^/]+)(?:\/([^/]+))?$/))) await chatPage(me, decodeURIComponent(m[1]), m[2] && decodeURIComponent(m[2]));
  else if (path === '/sessions') await sessionsPage(me);
  else if (path === '/traces') await tracesPage(me);
  else if ((m = path.match(/^\/traces\/([^/]+)$/))) await tracePage(me, decodeURIComponent(m[1]));
  else if (path === '/usage') await usagePage(me);
  else if (path === '/tokens') await tokensPage();
  else if (path === '/gw' && isAdmin(me)) go('#/gw/providers');
  else if ((m = path.match(/^\/gw\/([a-z-]+)$/)) && isAdmin(me) && adminPages[m[1]]) await adminPages[m[1]](me);
  else return false;
  return true;
}

// agentNames maps agent ids to their keys (for traces, sessions, usage).
async function agentNames() {
  const names = new Map();
  try {
    for (const a of (await gw('GET', '/agents')).data) names.set(a.id, a.agent_key);
  } catch { /* a name is a nicety */ }
  return names;
}

function table(cls, heads, rows, empty) {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h('table', { class: cls },
    h('thead', {}, h('tr', {}, heads.map((t) => h('th', { scope: 'col', class: /^(Runs|Tokens|In|Out|Messages|Duration|Spans)/.test(t) ? 'num' : null }, t)))),
    h('tbody', {}, rows));
}

function badge(text, good) {
  return h('span', { class: 'status status-' + (good ? 'active' : 'revoked') }, text);
}

// --- agents ---------------------------------------------------------------

async function agentsPage(me) {
  const list = h('div', { id: 'agent-list' });
  const err = h('div');
  const refresh = async () => {
    const agents = (await gw('GET', '/agents')).data;
    list.replaceChildren(table('agents', ['Agent', 'Name', 'Model', 'Status', 'Owner', 'Shared with', ''],
      agents.map((a) => h('tr', { 'data-agent-key': a.agent_key },
        h('td', {}, h('a', { href: '#/agents/' + a.id, class: 'agent-link' }, a.agent_key)),
        h('td', {}, a.display_name || '—'),
        h('td', {}, h('code', {}, a.model || '—')),
        h('td', {}, badge(a.status, a.status === 'active')),
        h('td', {}, person(a.owner_id)),
        h('td', {}, String(a.shared_with.length)),
        h('td', {}, h('a', { href: '#/chat/' + encodeURIComponent(a.agent_key), class: 'chat-link' }, 'Chat')))),
      'No agents yet: create one above.'));
  };
  let providers = [];
  try { providers = (await gw('GET', '/providers')).data; } catch (x) { err.replaceChildren(errorBox(x)); }
  const key = h('input', { id: 'agent-key', required: true, maxlength: 64, placeholder: 'e.g. helper' });
  const name = h('input', { id: 'agent-name', maxlength: 100 });
  const provider = h('select', { id: 'agent-provider', required: true },
    providers.map((p) => h('option', { value: p.name }, p.display_name || p.name)));
  const model = h('input', { id: 'agent-model', required: true, placeholder: 'e.g. gpt-4o-mini' });
  const prompt = h('textarea', { id: 'agent-prompt', rows: 3, placeholder: 'You are a helpful assistant.' });
  const cerr = h('div');
  const form = h('form', { class: 'card inline', id: 'create-agent', onsubmit: onSubmit(cerr, async () => {
    const body = { agent_key: key.value.trim(), provider: provider.value, model: model.value.trim() };
    if (name.value.trim()) body.display_name = name.value.trim();
    if (prompt.value.trim()) body.system_prompt = prompt.value;
    const a = await gw('POST', '/agents', body);
    go('#/agents/' + a.id);
  }) },
  h('h2', {}, 'Create an agent'),
  h('label', {}, 'Key', key), h('label', {}, 'Display name', name),
  h('label', {}, 'Provider', provider), h('label', {}, 'Model', model),
  h('label', { class: 'wide' }, 'System prompt', prompt),
  h('button', { type: 'submit' }, 'Create agent'), cerr);
  page('Agents', h('p', { class: 'muted' }, 'Your gateway user id is ', h('code', { id: 'my-gateway-user' }, me.id),
    ': these are the agents of X-Gateway-User-Id: ', h('code', {}, me.id), ' on the gateway (yours and those shared with you).'),
  providers.length ? form : h('p', { class: 'muted' }, 'No provider is configured yet: an admin adds one under Gateway admin.'),
  err, list, await mcpAccess());
  await refresh();
}

// mcpAccess is the MCP servers section of the agents page: a user asks
// for one (an admin reviews the request), and sees their requests.
async function mcpAccess() {
  let servers;
  try { servers = (await gw('GET', '/mcp/servers')).data; } catch { return null; }
  if (servers.length === 0) return null;
  const mine = h('div', { id: 'my-mcp-requests' });
  const names = new Map(servers.map((s) => [s.id, s.display_name || s.name]));
  const refresh = async () => {
    const rs = [];
    for (const st of ['pending', 'approved', 'denied']) rs.push(...(await gw('GET', '/mcp/requests' + q({ status: st }))).data);
    fill(mine, rs.length ? table('my-mcp-requests', ['Server', 'Reason', 'Asked', 'Status'], rs.map((r) => h('tr', { 'data-request-id': r.id },
      h('td', {}, names.get(r.server_id) || r.server_id), h('td', {}, r.reason || '—'), h('td', {}, when(r.created_at)),
      h('td', { class: 'request-status' }, r.status)))) : null);
  };
  const server = h('select', { id: 'mcp-request-server' }, servers.map((s) => h('option', { value: s.id }, s.display_name || s.name)));
  const reason = h('input', { id: 'mcp-request-reason', required: true, maxlength: 500, placeholder: 'what it is for' });
  const err = h('div');
  const form = h('form', { class: 'inline', id: 'mcp-request', onsubmit: onSubmit(err, async () => {
    await gw('POST', '/mcp/requests', { server_id: server.value, reason: reason.value.trim() });
    reason.value = '';
    await refresh();
  }) }, h('label', {}, 'Server', server), h('label', { class: 'grow' }, 'Reason', reason), h('button', { type: 'submit' }, 'Ask for access'));
  await refresh();
  return h('section', { class: 'card' }, h('h2', {}, 'MCP servers'),
    h('p', { class: 'muted' }, 'Ask an admin for access to a server for your runs.'), form, err, mine);
}

async function agentPage(me, id) {
  let a = await gw('GET', '/agents/' + id);
  const err = h('div');
  const facts = h('dl', { class: 'facts' });
  const renderFacts = () => fill(facts,
    h('dt', {}, 'Key'), h('dd', {}, h('code', {}, a.agent_key)),
    h('dt', {}, 'Status'), h('dd', {}, badge(a.status, a.status === 'active')),
    h('dt', {}, 'Model'), h('dd', {}, h('code', {}, a.model)),
    h('dt', {}, 'Owner'), h('dd', {}, person(a.owner_id)),
    h('dt', {}, 'Created'), h('dd', {}, when(a.created_at)),
    h('dt', {}, 'Updated'), h('dd', {}, when(a.updated_at)));
  renderFacts();
  const prompt = h('textarea', { id: 'edit-prompt', rows: 8, value: a.system_prompt });
  const perr = h('div');
  const saved = h('span', { class: 'copied', 'aria-live': 'polite', id: 'prompt-saved' });
  const promptForm = h('form', { class: 'card', id: 'edit-agent-prompt', onsubmit: onSubmit(perr, async () => {
    a = await gw('PUT', '/agents/' + id, { system_prompt: prompt.value });
    renderFacts();
    saved.textContent = 'Saved.';
  }) }, h('h2', {}, 'System prompt'), prompt,
  h('div', { class: 'actions' }, saved, h('button', { type: 'submit' }, 'Save prompt')), perr);

  const shares = h('div', { id: 'share-list' });
  const serr = h('div');
  const refreshShares = async () => {
    let list = [];
    try {
      list = (await gw('GET', `/agents/${id}/sharing`)).data;
    } catch (x) {
      if (x instanceof APIError && x.status === 403) { shares.replaceChildren(h('p', { class: 'muted' }, 'Only the owner sees the shares.')); return; }
      throw x;
    }
    shares.replaceChildren(table('shares', ['User', 'Role', ''], list.map((s) => h('tr', {},
      h('td', {}, person(s.user_id)), h('td', {}, s.role),
      h('td', {}, h('button', { type: 'button', class: 'secondary', onclick: () => guarded(serr, async () => {
        await gw('DELETE', `/agents/${id}/sharing/${encodeURIComponent(s.user_id)}`);
        await refreshShares();
      }) }, 'Revoke')))), 'Not shared with anyone.'));
  };
  const shareUser = h('input', { id: 'share-user', required: true, placeholder: 'their console user id' });
  const shareRole = h('select', { id: 'share-role' }, h('option', { value: 'user' }, 'user (run)'),
    h('option', { value: 'operator' }, 'operator (also edit the prompt)'));
  const shareForm = h('form', { class: 'inline', id: 'share-agent', onsubmit: onSubmit(serr, async () => {
    await gw('POST', `/agents/${id}/sharing`, { user_id: shareUser.value.trim(), role: shareRole.value });
    shareUser.value = '';
    await refreshShares();
  }) }, h('label', {}, 'User', shareUser), h('label', {}, 'Role', shareRole), h('button', { type: 'submit' }, 'Share'));
  const del = a.owner_id === me.id ? h('button', { type: 'button', class: 'danger', id: 'agent-delete', onclick: () => guarded(err, async () => {
    if (!await confirmDialog('Delete this agent?', `“${a.agent_key}” is removed with its sessions. This cannot be undone.`, 'Delete')) return;
    await gw('DELETE', '/agents/' + id);
    go('#/agents');
  }) }, 'Delete') : null;
  page(a.display_name || a.agent_key, h('p', {}, h('a', { href: '#/agents' }, '← all agents')), err,
    h('div', { class: 'grid' }, h('section', { class: 'card' }, facts,
      h('div', { class: 'actions' }, h('a', { class: 'button', href: '#/chat/' + encodeURIComponent(a.agent_key), id: 'agent-chat' }, 'Chat'),
        h('a', { class: 'button secondary', href: '#/traces?agent=' + a.id }, 'Traces'), del)),
    h('section', { class: 'card' }, h('h2', {}, 'Sharing'), shares, shareForm, serr)),
    promptForm);
  await refreshShares();
}

// --- chat over the gateway's WebSocket RPC --------------------------------

// rpcSocket opens the bridged WebSocket RPC; call(method, params, onEvent)
// resolves with the response's payload, onEvent gets the request's events.
function rpcSocket() {
  const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/gateway/ws';
  const ws = new WebSocket(url);
  const pending = new Map();
  let seq = 0;
  let closed = null;
  const opened = new Promise((resolve, reject) => {
    ws.addEventListener('open', resolve);
    ws.addEventListener('error', () => reject(new Error('the chat connection failed')));
  });
  ws.addEventListener('close', (e) => {
    closed = new Error(`the chat connection closed (${e.code}${e.reason ? ': ' + e.reason : ''})`);
    for (const p of pending.values()) p.reject(closed);
    pending.clear();
  });
  ws.addEventListener('message', (e) => {
    let f;
    try { f = JSON.parse(e.data); } catch { return; }
    const p = pending.get(f.id);
    if (!p) return;
    if (f.type === 'event') { p.onEvent && p.onEvent(f.event, f.payload || {}); return; }
    pending.delete(f.id);
    if (f.ok) p.resolve(f.payload);
    else p.reject(new APIError(0, (f.error && f.error.code) || 'ERROR', (f.error && f.error.message) || 'request failed'));
  });
  return {
    async call(method, params, onEvent) {
      await opened;
      if (closed) throw closed;
      const id = String(++seq);
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject, onEvent });
        ws.send(JSON.stringify({ type: 'req', id, method, params }));
      });
    },
    close() { ws.close(); },
  };
}

function bubble(role, text) {
  return h('div', { class: 'msg msg-' + (role === 'user' ? 'user' : 'assistant'), 'data-role': role },
    h('div', { class: 'msg-role' }, role), h('div', { class: 'msg-text' }, text));
}

async function chatPage(me, agentKey, sessionKey) {
  if (!sessionKey) {
    const rnd = crypto.getRandomValues(new Uint8Array(6));
    go(`#/chat/${encodeURIComponent(agentKey)}/console-${Array.from(rnd, (b) => b.toString(16).padStart(2, '0')).join('')}`);
    return;
  }
  const a = await gw('GET', '/agents/' + encodeURIComponent(agentKey));
  const sock = rpcSocket();
  onLeave(() => sock.close());
  const log = h('div', { class: 'chat-log', id: 'chat-log', 'aria-live': 'polite' });
  const err = h('div');
  try {
    const hist = await sock.call('chat.history', { sessionKey });
    for (const m of hist.messages || []) if (m.role === 'user' || m.role === 'assistant') log.append(bubble(m.role, m.content));
  } catch (x) {
    if (!(x instanceof APIError && x.code === 'NOT_FOUND')) err.replaceChildren(errorBox(x));
  }
  const input = h('textarea', { id: 'chat-input', rows: 2, required: true, placeholder: 'Say something…' });
  const send = h('button', { type: 'submit', id: 'chat-send' }, 'Send');
  const status = h('span', { class: 'muted', id: 'chat-status', 'aria-live': 'polite' });
  const form = h('form', { class: 'chat-form', id: 'chat-form', onsubmit: onSubmit(err, async () => {
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    log.append(bubble('user', text));
    const answer = bubble('assistant', '');
    answer.classList.add('streaming');
    const out = answer.querySelector('.msg-text');
    out.id = 'chat-answer';
    log.querySelectorAll('[id=chat-answer]').forEach((el) => { if (el !== out) el.removeAttribute('id'); });
    log.append(answer);
    send.disabled = true;
    status.textContent = 'thinking…';
    try {
      const res = await sock.call('chat.send', { agentId: a.agent_key, sessionKey, message: text, stream: true }, (ev, p) => {
        if (ev === 'chat' && p.kind === 'chunk') { out.textContent += p.delta; status.textContent = 'streaming…'; }
        if (ev === 'agent' && p.kind === 'run.started') answer.dataset.runId = p.run_id;
      });
      out.textContent = res.content;
      answer.dataset.runId = res.run_id;
      const u = res.usage || {};
      answer.append(h('div', { class: 'msg-meta' }, `${num(u.prompt_tokens)} in · ${num(u.completion_tokens)} out · `,
        h('a', { href: '#/traces/' + encodeURIComponent(res.run_id), class: 'trace-link' }, 'trace')));
      status.textContent = '';
    } finally {
      answer.classList.remove('streaming');
      send.disabled = false;
    }
  }) }, input, h('div', { class: 'actions' }, status, send));
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
  });
  page(`Chat with ${a.display_name || a.agent_key}`,
    h('p', { class: 'muted' }, 'Session ', h('code', { id: 'chat-session' }, sessionKey), ' · ',
      h('a', { href: '#/chat/' + encodeURIComponent(a.agent_key) }, 'new session'), ' · ',
      h('a', { href: '#/sessions' }, 'all sessions')),
    h('section', { class: 'card' }, log, form), err);
  input.focus();
}

async function sessionsPage(me) {
  const names = await agentNames();
  const r = await gw('GET', '/sessions' + q({ limit: 100 }));
  page('Sessions', table('sessions', ['Session', 'Agent', 'User', 'Channel', 'Messages', 'Tokens', 'Updated'],
    r.data.map((s) => {
      const agent = names.get(s.agent_id) || s.agent_id;
      return h('tr', { 'data-session': s.key },
        h('td', {}, h('a', { href: `#/chat/${encodeURIComponent(agent)}/${encodeURIComponent(s.key)}` }, s.label || s.key)),
        h('td', {}, agent), h('td', {}, person(s.user_id)),
        h('td', {}, s.channel || '—'), h('td', { class: 'num' }, num(s.message_count)),
        h('td', { class: 'num' }, `${num(s.prompt_tokens)} / ${num(s.completion_tokens)}`),
        h('td', {}, when(s.updated_at)));
    }), 'No sessions yet: chat with an agent.'),
  h('p', { class: 'muted' }, `${r.total} in all.`));
}

// --- traces ---------------------------------------------------------------

async function tracesPage(me) {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const names = await agentNames();
  const agent = h('select', { id: 'trace-agent' }, h('option', { value: '' }, 'every agent'),
    Array.from(names, ([id, key]) => h('option', { value: id, selected: id === params.get('agent') }, key)));
  const status = h('select', { id: 'trace-status' }, ['', 'ok', 'failed', 'timeout'].map((s) => h('option', { value: s }, s || 'any status')));
  const user = isAdmin(me) ? h('input', { id: 'trace-user', placeholder: 'every user', value: params.get('user') || '' }) : null;
  const list = h('div', { id: 'trace-list' });
  const err = h('div');
  const load = () => guarded(err, async () => {
    const r = await gw('GET', '/traces' + q({ agent_id: agent.value, status: status.value, user_id: user && user.value.trim(), limit: 100 }));
    list.replaceChildren(table('traces', ['Run', 'Agent', 'User', 'Model', 'Status', 'Tokens in/out', 'Spans', 'Duration', 'Started'],
      r.data.map((t) => h('tr', { 'data-trace-id': t.id },
        h('td', {}, h('a', { href: '#/traces/' + encodeURIComponent(t.id), class: 'trace-link' }, t.name)),
        h('td', {}, names.get(t.agent_id) || h('code', {}, t.agent_id)),
        h('td', {}, person(t.user_id)),
        h('td', {}, t.model || '—'), h('td', {}, badge(t.status, t.status === 'ok')),
        h('td', { class: 'num' }, `${num(t.tokens.input)} / ${num(t.tokens.output)}`),
        h('td', { class: 'num' }, String(t.span_count)), h('td', { class: 'num' }, ms(t.duration_ms)),
        h('td', {}, when(t.start_time)))), 'No runs yet.'));
  });
  const form = h('form', { class: 'card inline', id: 'trace-filter', onsubmit: (e) => { e.preventDefault(); load(); } },
    h('label', {}, 'Agent', agent), h('label', {}, 'Status', status), user ? h('label', {}, 'User', user) : null,
    h('button', { type: 'submit' }, 'Filter'));
  page(isAdmin(me) ? 'Traces (every user)' : 'My traces', form, err, list);
  await load();
}

// spanRows flattens the span tree, depth first, with each span's depth.
function spanRows(spans, depth = 0, out = []) {
  for (const s of spans) {
    out.push({ s, depth });
    spanRows(s.children || [], depth + 1, out);
  }
  return out;
}

function spanLabel(s) {
  let label = `${s.name} · ${ms(s.duration_ms)}`;
  if (s.span_type === 'llm') label += ` · ${num(s.tokens.input)} in / ${num(s.tokens.output)} out`;
  return label;
}

// timeline draws spans as bars on the trace's time axis (SVG attributes,
// no inline style: the CSP forbids it).
function timeline(t) {
  const rows = spanRows(t.spans || []);
  const ns = 'http://www.w3.org/2000/svg';
  const svg = (tag, attrs, text) => {
    const el = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
    if (text != null) el.textContent = text;
    return el;
  };
  const W = 1000, rowH = 30, top = 24, labelW = 0;
  const t0 = Date.parse(t.start_time);
  const total = Math.max(1, t.duration_ms, ...rows.map(({ s }) => Date.parse(s.end_time) - t0));
  const root = svg('svg', { viewBox: `0 0 ${W} ${top + rows.length * rowH + 8}`, class: 'timeline', id: 'trace-timeline',
    role: 'img', 'aria-label': 'the trace’s spans on a time line' });
  for (let i = 0; i <= 4; i++) {
    const x = labelW + (W - labelW) * i / 4;
    root.append(svg('line', { x1: x, x2: x, y1: 16, y2: top + rows.length * rowH, class: 'tl-grid' }));
    root.append(svg('text', { x: Math.min(x + 2, W - 60), y: 12, class: 'tl-axis' }, ms(Math.round(total * i / 4))));
  }
  rows.forEach(({ s, depth }, i) => {
    const x = labelW + (W - labelW) * Math.max(0, Date.parse(s.start_time) - t0) / total;
    const w = Math.max(3, (W - labelW) * s.duration_ms / total);
    const y = top + i * rowH;
    const g = svg('g', { class: `span span-${s.span_type} span-${s.status}`, 'data-span-type': s.span_type, 'data-span-name': s.name });
    g.append(svg('rect', { x, y: y + 2, width: w, height: rowH - 8, rx: 3 }));
    g.append(svg('text', { x: Math.min(x + 4 + depth * 0, W - 8), y: y + rowH / 2 + 3, class: 'tl-label',
      'text-anchor': x > W * 0.6 ? 'end' : 'start', dx: x > W * 0.6 ? w - 8 : 0 }, spanLabel(s)));
    g.append(svg('title', {}, `${s.span_type}: ${spanLabel(s)}${s.error ? ' — ' + s.error : ''}`));
    root.append(g);
  });
  return root;
}

async function tracePage(me, id) {
  const t = await gw('GET', '/traces/' + encodeURIComponent(id));
  const names = await agentNames();
  const rows = spanRows(t.spans || []);
  page(`Trace ${t.name}`, h('p', {}, h('a', { href: '#/traces' }, '← all traces')),
    h('section', { class: 'card' }, h('dl', { class: 'facts' },
      h('dt', {}, 'Run'), h('dd', {}, h('code', { id: 'trace-id' }, t.id)),
      h('dt', {}, 'Agent'), h('dd', {}, names.get(t.agent_id) || h('code', {}, t.agent_id)),
      h('dt', {}, 'User'), h('dd', {}, person(t.user_id)),
      h('dt', {}, 'Status'), h('dd', {}, badge(t.status, t.status === 'ok'), t.error ? ' ' + t.error : ''),
      h('dt', {}, 'Model'), h('dd', {}, `${t.provider || '—'} / ${t.model || '—'}`),
      h('dt', {}, 'Tokens'), h('dd', { id: 'trace-tokens' }, `${num(t.tokens.input)} in, ${num(t.tokens.output)} out`),
      h('dt', {}, 'Duration'), h('dd', {}, ms(t.duration_ms)),
      h('dt', {}, 'Started'), h('dd', {}, when(t.start_time)),
      t.input_preview ? [h('dt', {}, 'Input'), h('dd', {}, t.input_preview)] : null,
      t.output_preview ? [h('dt', {}, 'Output'), h('dd', {}, t.output_preview)] : null)),
    h('section', { class: 'card' }, h('h2', {}, `Spans (${rows.length})`), rows.length ? timeline(t) : h('p', { class: 'empty' }, 'No spans.'),
      table('spans', ['Span', 'Type', 'Duration', 'Tokens in/out', 'Status'], rows.map(({ s, depth }) => h('tr', { 'data-span-type': s.span_type },
        h('td', { class: 'depth-' + Math.min(depth, 4) }, s.name), h('td', {}, s.span_type),
        h('td', { class: 'num' }, ms(s.duration_ms)),
        h('td', { class: 'num' }, s.span_type === 'llm' ? `${num(s.tokens.input)} / ${num(s.tokens.output)}` : '—'),
        h('td', {}, badge(s.status, s.status === 'ok'), s.error ? ' ' + s.error : ''))), 'No spans.')));
}

// --- usage ----------------------------------------------------------------

const palette = ['#2563eb', '#c62828', '#2e7d32', '#b26a00', '#7b1fa2', '#00838f', '#5d4037', '#455a64'];

// seriesChart draws one uPlot chart of several series over days.
function seriesChart(box, days, series, yLabel) {
  box.replaceChildren();
  const xs = days.map((d) => Date.parse(d) / 1000);
  return new uPlot({
    width: Math.max(320, box.clientWidth || 640), height: 240,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    scales: { x: { time: true, range: (_u, lo, hi) => [lo - 43200, hi + 43200] }, y: { range: (_u, _lo, hi) => [0, Math.max(5, hi * 1.1)] } },
    axes: [{ incrs: [86400, 2 * 86400, 7 * 86400], values: (_u, ticks) => ticks.map((t) => new Date(t * 1000).toISOString().slice(5, 10)) },
      { label: yLabel }],
    series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: palette[i % palette.length],
      fill: palette[i % palette.length] + '55', paths: uPlot.paths.bars({ size: [0.6 / Math.max(1, series.length), 48] }), points: { show: false } }))],
  }, [xs, ...series.map((s) => s.values)], box);
}

async function usagePage(me) {
  const names = await agentNames();
  const groups = isAdmin(me) ? ['agent', 'user', 'model', 'provider'] : ['agent', 'model'];
  const groupBy = h('select', { id: 'usage-group' }, groups.map((g) => h('option', { value: g }, 'by ' + g)));
  const range = h('select', { id: 'usage-range' }, [7, 30, 90].map((d) => h('option', { value: d, selected: d === 30 }, `last ${d} days`)));
  const totals = h('div', { class: 'grid', id: 'usage-totals' });
  const byGroup = h('div', { class: 'chart', id: 'usage-by-group' });
  const inOut = h('div', { class: 'chart', id: 'usage-in-out' });
  const tableBox = h('div');
  const err = h('div');
  let plots = [];
  onLeave(() => plots.forEach((p) => p.destroy()));
  const load = () => guarded(err, async () => {
    const from = new Date(Date.now() - Number(range.value) * 86400000);
    from.setUTCHours(0, 0, 0, 0);
    const [grouped, summary] = await Promise.all([
      gw('GET', '/usage' + q({ granularity: 'day', group_by: groupBy.value, from: from.toISOString().replace(/\.\d+Z$/, 'Z') })),
      gw('GET', '/usage/summary' + q({ period: '30d' })),
    ]);
    const c = summary.current;
    fill(totals, [['Runs (30 days)', c.requests, 'usage-runs'], ['Tokens in', c.input_tokens, 'usage-in'],
      ['Tokens out', c.output_tokens, 'usage-out'], ['Tool calls', c.tool_calls, 'usage-tools'], ['Errors', c.errors, 'usage-errors']]
      .map(([label, v, id]) => h('section', { class: 'card stat' }, h('div', { class: 'muted' }, label), h('strong', { id }, num(v)))));
    const days = [...new Set(grouped.data.map((p) => p.bucket))].sort();
    const label = (g) => (groupBy.value === 'agent' ? names.get(g) || g : g || '—');
    const keys = [...new Set(grouped.data.map((p) => p.group))];
    const at = new Map(grouped.data.map((p) => [p.bucket + '|' + p.group, p]));
    const series = keys.map((g) => ({ label: label(g), values: days.map((d) => (at.get(d + '|' + g) || {}).total_tokens || 0) }));
    const sum = (d, f) => keys.reduce((s, g) => s + ((at.get(d + '|' + g) || {})[f] || 0), 0);
    byGroup.dataset.total = String(grouped.data.reduce((s, p) => s + p.total_tokens, 0));
    plots.forEach((p) => p.destroy());
    plots = [];
    if (days.length === 0) {
      byGroup.replaceChildren(h('p', { class: 'empty' }, 'No runs in this period.'));
      inOut.replaceChildren();
    } else {
      plots.push(seriesChart(byGroup, days, series, 'tokens'));
      plots.push(seriesChart(inOut, days, [{ label: 'tokens in', values: days.map((d) => sum(d, 'input_tokens')) },
        { label: 'tokens out', values: days.map((d) => sum(d, 'output_tokens')) }], 'tokens'));
    }
    tableBox.replaceChildren(table('usage', ['Day (UTC)', groupBy.value, 'Runs', 'In', 'Out', 'Tool calls'],
      grouped.data.map((p) => h('tr', {}, h('td', {}, p.bucket.slice(0, 10)), h('td', {}, label(p.group)),
        h('td', { class: 'num' }, num(p.runs)), h('td', { class: 'num' }, num(p.input_tokens)),
        h('td', { class: 'num' }, num(p.output_tokens)), h('td', { class: 'num' }, num(p.tool_calls)))), 'No runs in this period.'));
  });
  groupBy.addEventListener('change', load);
  range.addEventListener('change', load);
  page(isAdmin(me) ? 'Usage (every user)' : 'My usage', totals, err,
    h('section', { class: 'card' }, h('div', { class: 'row' }, h('h2', {}, 'Tokens per day'), h('div', {}, groupBy, ' ', range)), byGroup),
    h('section', { class: 'card' }, h('h2', {}, 'Tokens in and out per day'), inOut,
      h('details', {}, h('summary', {}, 'As a table'), tableBox)));
  await load();
  every(15000, () => { load(); });
}

// --- management access tokens (/api/tokens) -------------------------------

async function tokensPage() {
  const list = h('div', { id: 'token-list' });
  const revealSlot = h('div', { id: 'reveal-slot' });
  const err = h('div');
  let missing = false;
  const refresh = async () => {
    let toks;
    try {
      toks = (await api('GET', '/api/tokens')).tokens;
    } catch (x) {
      if (x instanceof APIError && (x.status === 404 || x.status === 405)) {
        missing = true;
        list.replaceChildren(h('p', { class: 'empty', id: 'tokens-unavailable' }, 'This server has no management access tokens (no /api/tokens).'));
        return;
      }
      throw x;
    }
    list.replaceChildren(table('tokens', ['Name', 'Scopes', 'Created', 'Last used', 'Expires', ''], toks.map((t) => h('tr', { 'data-token-id': t.id },
      h('td', {}, t.name), h('td', {}, (t.scopes || []).join(', ')), h('td', {}, when(t.createdAt)),
      h('td', {}, when(t.lastUsedAt)), h('td', {}, t.expiresAt ? when(t.expiresAt) : 'never'),
      h('td', {}, h('button', { type: 'button', class: 'danger', onclick: () => guarded(err, async () => {
        if (!await confirmDialog('Revoke this token?', `“${t.name}” stops working at once.`, 'Revoke')) return;
        await api('DELETE', '/api/tokens/' + encodeURIComponent(t.id));
        await refresh();
      }) }, 'Revoke')))), 'No tokens yet.'));
  };
  const name = h('input', { id: 'token-name', required: true, maxlength: 100 });
  const scopes = h('input', { id: 'token-scopes', placeholder: 'e.g. keys:read, keys:write' });
  const expires = h('input', { type: 'date', id: 'token-expires' });
  const cerr = h('div');
  const form = h('form', { class: 'card inline', id: 'create-token', onsubmit: onSubmit(cerr, async () => {
    const body = { name: name.value.trim(), scopes: scopes.value.split(',').map((s) => s.trim()).filter(Boolean) };
    if (expires.value) body.expiresAt = new Date(expires.value + 'T23:59:59').toISOString();
    const r = await api('POST', '/api/tokens', body);
    revealSlot.replaceChildren(revealPanel(`Token “${r.name || body.name}” created`, r.token));
    name.value = '';
    await refresh();
  }) }, h('h2', {}, 'Create a token'), h('label', {}, 'Name', name), h('label', {}, 'Scopes (comma-separated)', scopes),
  h('label', {}, 'Expires (optional)', expires), h('button', { type: 'submit' }, 'Create token'), cerr);
  await guarded(err, refresh);
  page('Access tokens', h('p', { class: 'muted' }, 'Tokens for scripts and CI against the management API; each is shown once.'),
    missing ? null : form, revealSlot, err, list);
}

// --- gateway admin --------------------------------------------------------

const adminTabs = [['providers', 'Providers'], ['api-keys', 'API keys'], ['tools', 'Tools & MCP'],
  ['requests', 'Access requests'], ['channels', 'Channels'], ['activity', 'Activity']];

function adminPage(tab, ...children) {
  page('Gateway admin', h('nav', { class: 'tabs', 'aria-label': 'gateway admin' },
    adminTabs.map(([id, label]) => h('a', { href: '#/gw/' + id, class: id === tab ? 'current' : null, 'aria-current': id === tab ? 'page' : null }, label))),
  children);
}

async function providersPage() {
  const list = h('div', { id: 'provider-list' });
  const err = h('div');
  const refresh = async () => {
    const ps = (await gw('GET', '/providers')).data;
    list.replaceChildren(table('providers', ['Name', 'Type', 'API base', 'Key', 'Enabled', 'Created', ''], ps.map((p) => h('tr', { 'data-provider': p.name },
      h('td', {}, p.display_name ? `${p.display_name} (${p.name})` : p.name), h('td', {}, p.provider_type),
      h('td', {}, h('code', {}, p.api_base || '—')), h('td', {}, h('code', {}, p.api_key || '—')),
      h('td', {}, badge(p.enabled ? 'enabled' : 'disabled', p.enabled)), h('td', {}, when(p.created_at)),
      h('td', {}, h('button', { type: 'button', class: 'danger', onclick: () => guarded(err, async () => {
        if (!await confirmDialog('Delete this provider?', `“${p.name}” is removed (refused while an agent uses it).`, 'Delete')) return;
        await gw('DELETE', '/providers/' + p.id);
        await refresh();
      }) }, 'Delete')))), 'No providers yet.'));
  };
  const name = h('input', { id: 'provider-name', required: true });
  const type = h('select', { id: 'provider-type' }, h('option', { value: 'openai_compat' }, 'openai_compat'), h('option', { value: 'echo' }, 'echo (offline, for demos)'));
  const base = h('input', { id: 'provider-base', placeholder: 'its OpenAI-compatible /v1 base URL' });
  const key = h('input', { id: 'provider-key', type: 'password', autocomplete: 'off' });
  const cerr = h('div');
  const form = h('form', { class: 'card inline', id: 'create-provider', onsubmit: onSubmit(cerr, async () => {
    const body = { name: name.value.trim(), provider_type: type.value };
    if (base.value.trim()) body.api_base = base.value.trim();
    if (key.value) body.api_key = key.value;
    await gw('POST', '/providers', body);
    name.value = ''; key.value = '';
    await refresh();
  }) }, h('h2', {}, 'Add a provider'), h('label', {}, 'Name', name), h('label', {}, 'Type', type),
  h('label', {}, 'API base', base), h('label', {}, 'API key', key), h('button', { type: 'submit' }, 'Add'), cerr);
  adminPage('providers', form, err, list);
  await refresh();
}

async function apiKeysPage(me) {
  const list = h('div', { id: 'gw-key-list' });
  const revealSlot = h('div', { id: 'reveal-slot' });
  const err = h('div');
  const refresh = async () => {
    const ks = (await gw('GET', '/api-keys')).data;
    list.replaceChildren(table('gw-keys', ['Name', 'Key', 'Scopes', 'User', 'Created', 'Expires', 'Status', ''], ks.map((k) => h('tr', { 'data-key-id': k.id },
      h('td', {}, k.name), h('td', {}, h('code', {}, k.prefix + '…')), h('td', {}, k.scopes.join(', ')),
      h('td', {}, person(k.user_id)), h('td', {}, when(k.created_at)),
      h('td', {}, k.expires_at ? when(k.expires_at) : 'never'), h('td', {}, badge(k.revoked ? 'revoked' : 'active', !k.revoked)),
      h('td', {}, k.revoked ? null : h('button', { type: 'button', class: 'danger', onclick: () => guarded(err, async () => {
        if (!await confirmDialog('Revoke this API key?', `“${k.name}” stops working at once.`, 'Revoke')) return;
        await gw('DELETE', '/api-keys/' + k.id);
        await refresh();
      }) }, 'Revoke')))), 'No API keys yet.'));
  };
  const name = h('input', { id: 'gw-key-name', required: true });
  const scope = h('select', { id: 'gw-key-scope' }, ['operator.read', 'operator.write', 'operator.admin'].map((s) => h('option', { value: s, selected: s === 'operator.write' }, s)));
  // A read or write key acts for one user (an admin key may act for any).
  const user = h('input', { id: 'gw-key-user', placeholder: 'the user it acts for', value: me.id });
  const cerr = h('div');
  const form = h('form', { class: 'card inline', id: 'create-gw-key', onsubmit: onSubmit(cerr, async () => {
    const body = { name: name.value.trim(), scopes: [scope.value] };
    if (user.value.trim()) body.user_id = user.value.trim();
    const r = await gw('POST', '/api-keys', body);
    revealSlot.replaceChildren(revealPanel(`Gateway API key “${r.name}” created`, r.key));
    name.value = '';
    await refresh();
  }) }, h('h2', {}, 'Create a gateway API key'), h('label', {}, 'Name', name), h('label', {}, 'Scope', scope),
  h('label', {}, 'User', user), h('button', { type: 'submit' }, 'Create'), cerr);
  adminPage('api-keys', form, revealSlot, err, list);
  await refresh();
}

async function toolsPage() {
  const [tools, servers] = await Promise.all([gw('GET', '/tools/custom'), gw('GET', '/mcp/servers')]);
  const states = await Promise.all(servers.data.map((s) => gw('GET', '/mcp/servers/' + s.id).then((v) => v.status, (x) => ({ connected: false, error: x.message, tools: [] }))));
  const err = h('div');
  const name = h('input', { id: 'mcp-name', required: true });
  const transport = h('select', { id: 'mcp-transport' }, ['streamable-http', 'sse', 'stdio'].map((t) => h('option', { value: t }, t)));
  const target = h('input', { id: 'mcp-target', required: true, placeholder: 'URL, or the command for stdio' });
  const form = h('form', { class: 'card inline', id: 'create-mcp', onsubmit: onSubmit(err, async () => {
    const body = { name: name.value.trim(), transport: transport.value };
    if (transport.value === 'stdio') {
      const [cmd, ...args] = target.value.trim().split(/\s+/);
      body.command = cmd;
      body.args = args;
    } else body.url = target.value.trim();
    await gw('POST', '/mcp/servers', body);
    await toolsPage();
  }) }, h('h2', {}, 'Register an MCP server'), h('label', {}, 'Name', name), h('label', {}, 'Transport', transport),
  h('label', { class: 'wide' }, 'URL or command', target), h('button', { type: 'submit' }, 'Register'));
  adminPage('tools', h('h2', {}, 'MCP servers'),
    table('mcp-servers', ['Server', 'Transport', 'Target', 'Enabled', 'Connection', 'Tools'], servers.data.map((s, i) => {
      const st = states[i];
      return h('tr', { 'data-mcp': s.name },
        h('td', {}, s.display_name || s.name), h('td', {}, s.transport),
        h('td', {}, h('code', {}, s.url || [s.command, ...(s.args || [])].join(' '))),
        h('td', {}, s.enabled ? 'yes' : 'no'),
        h('td', { class: 'mcp-state' }, badge(st.connected ? 'connected' : 'not connected', st.connected), st.error ? h('div', { class: 'muted' }, st.error) : null),
        h('td', { class: 'num' }, String((st.tools || []).length)));
    }), 'No MCP servers registered.'),
    form, err,
    h('h2', {}, 'Custom tools'),
    table('custom-tools', ['Tool', 'Description', 'Command', 'Agent', 'Enabled'], tools.data.map((t) => h('tr', {},
      h('td', {}, t.name), h('td', {}, t.description || '—'), h('td', {}, h('code', {}, (t.command || []).join(' '))),
      h('td', {}, t.agent_id ? h('code', {}, t.agent_id) : 'every agent'), h('td', {}, t.enabled ? 'yes' : 'no'))),
    'No custom tools (they are created through the API: POST /v1/tools/custom).'));
}

async function requestsPage() {
  const status = h('select', { id: 'request-status' }, ['pending', 'approved', 'denied'].map((s) => h('option', { value: s }, s)));
  const list = h('div', { id: 'request-list' });
  const err = h('div');
  const servers = new Map((await gw('GET', '/mcp/servers')).data.map((s) => [s.id, s.name]));
  const refresh = () => guarded(err, async () => {
    const rs = (await gw('GET', '/mcp/requests' + q({ status: status.value }))).data;
    list.replaceChildren(table('mcp-requests', ['Server', 'User', 'Agent', 'Reason', 'Asked', 'Status', ''], rs.map((r) => {
      const review = (approved) => guarded(err, async () => {
        await gw('POST', `/mcp/requests/${r.id}/review`, { approved, note: approved ? 'approved in the console' : 'denied in the console' });
        await refresh();
      });
      return h('tr', { 'data-request-id': r.id },
        h('td', {}, servers.get(r.server_id) || r.server_id), h('td', {}, person(r.user_id)),
        h('td', {}, r.agent_id ? h('code', {}, r.agent_id) : '—'), h('td', {}, r.reason || '—'), h('td', {}, when(r.created_at)),
        h('td', {}, r.status),
        h('td', {}, r.status === 'pending' ? h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'approve', onclick: () => review(true) }, 'Approve'),
          h('button', { type: 'button', class: 'danger deny', onclick: () => review(false) }, 'Deny')) : (r.note || '')));
    }), `No ${status.value} requests.`));
  });
  status.addEventListener('change', refresh);
  adminPage('requests', h('div', { class: 'row' }, h('h2', {}, 'MCP access requests'), status), err, list);
  await refresh();
}

async function channelsPage() {
  const names = await agentNames();
  const cs = (await gw('GET', '/channel-instances')).data;
  adminPage('channels', table('channels', ['Channel', 'Type', 'Agent', 'Enabled', 'Created'], cs.map((c) => h('tr', {},
    h('td', {}, c.display_name || c.name), h('td', {}, c.channel_type), h('td', {}, names.get(c.agent_id) || h('code', {}, c.agent_id)),
    h('td', {}, c.enabled ? 'yes' : 'no'), h('td', {}, when(c.created_at)))),
  'No channel instances (created through the API: POST /v1/channel-instances).'));
}

async function activityPage() {
  const fields = [['action', 'e.g. mcp_request.review'], ['entity_type', 'e.g. agent'], ['user_id', 'a user id'], ['actor_type', 'console, token, api_key']];
  const inputs = Object.fromEntries(fields.map(([f, ph]) => [f, h('input', { id: 'activity-' + f.replace('_', '-'), placeholder: ph })]));
  const list = h('div', { id: 'activity-list' });
  const err = h('div');
  const load = () => guarded(err, async () => {
    const r = await gw('GET', '/activity' + q({ ...Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value.trim()])), limit: 100 }));
    list.replaceChildren(table('activity', ['When', 'Action', 'Entity', 'By', 'User', 'Summary'], r.data.map((a) => h('tr', { 'data-action': a.action },
      h('td', {}, when(a.at)), h('td', {}, h('code', {}, a.action)), h('td', {}, `${a.entity_type} `, h('code', {}, a.entity_id || '')),
      h('td', {}, `${a.actor_type}`), h('td', {}, person(a.user_id)), h('td', {}, a.summary || '—'))),
    'Nothing matches.'), h('p', { class: 'muted' }, `${r.total} entries match.`));
  });
  const form = h('form', { class: 'card inline', id: 'activity-filter', onsubmit: (e) => { e.preventDefault(); load(); } },
    fields.map(([f]) => h('label', {}, f.replace('_', ' '), inputs[f])), h('button', { type: 'submit' }, 'Filter'));
  adminPage('activity', form, err, list);
  await load();
}

const adminPages = {
  providers: providersPage, 'api-keys': apiKeysPage, tools: toolsPage, requests: requestsPage,
  channels: channelsPage, activity: activityPage,
};
