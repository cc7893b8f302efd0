// gatehouse console, the agent gateway's pages: every call goes through
// the bridge below /api/gateway on this origin, with the session cookie
// (the gateway's GET /v1/agents is GET /api/gateway/v1/agents here), and
// chat through the gateway's WebSocket RPC at /api/gateway/ws, which the
// session authenticates. The page never holds a gateway credential: a
// console user is a gateway user (their gateway user id is their console
// user id); a console admin acts as a gateway admin and sees every user's
// data. This module routes the gateway's pages and has the agents, chat
// and sessions pages; gwobserve.js has traces and usage, gwadmin.js the
// admin pages and the "Tokens" page (management access tokens,
// /api/tokens), gwlib.js what they share. Everything user-supplied is
// inserted as text.

import {
  h, fill, APIError, go, when, guarded, onSubmit, errorBox, confirmDialog, page, onLeave,
} from './app.js';
import { gw, q, isAdmin, num, usd, person, loadPeople, agentNames, table, badge } from './gwlib.js';
import { tracesPage, tracePage, usagePage } from './gwobserve.js';
import { tokensPage, adminPages } from './gwadmin.js';
import { providerPage } from './gwproviders.js';
import { fallbackEditor, fallbackSummary, providerName } from './gwfallbacks.js';

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
// gatewayRoute renders path if it is a gateway page; false if not.
export async function gatewayRoute(route, me) {
  const path = route.split('?')[0];
  await loadPeople(me, !/^\/(tokens|chat\/)/.test(path));
  let m;
  if (path === '/agents') await agentsPage(me);
  else if ((m = path.match(/^\/agents\/([0-9a-f-]{36})$/))) await agentPage(me, m[1]);
  else if ((m = path.match(/^\/chat\/([^/]+)(?:\/([^/]+))?$/))) await chatPage(me, decodeURIComponent(m[1]), m[2] && decodeURIComponent(m[2]));
  else if (path === '/sessions') await sessionsPage(me);
  else if (path === '/traces') await tracesPage(me);
  else if ((m = path.match(/^\/traces\/([^/]+)$/))) await tracePage(me, decodeURIComponent(m[1]));
  else if (path === '/usage') await usagePage(me);
  else if (path === '/tokens') await tokensPage(me);
  else if (path === '/gw' && isAdmin(me)) go('#/gw/providers');
  else if ((m = path.match(/^\/gw\/([a-z-]+)$/)) && isAdmin(me) && adminPages[m[1]]) await adminPages[m[1]](me);
  else if ((m = path.match(/^\/gw\/providers\/([0-9a-f-]{36})$/)) && isAdmin(me)) await providerPage(me, m[1]);
  else return false;
  return true;
}
// --- agents ---------------------------------------------------------------

async function agentsPage(me) {
  const list = h('div', { id: 'agent-list' });
  const err = h('div');
  // Admins may list every user's agents (the bridge's view=all, reads only).
  const everyone = isAdmin(me) ? h('input', { type: 'checkbox', id: 'agents-everyone', onchange: () => guarded(err, refresh) }) : null;
  const refresh = async () => {
    const agents = (await gw('GET', '/agents' + (everyone?.checked ? '?view=all' : ''))).data;
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
  everyone ? h('label', { class: 'inline-check' }, everyone, ' every user\'s agents') : null,
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
  let providers = [];
  try { providers = (await gw('GET', '/providers')).data; } catch { /* names are a nicety */ }
  const err = h('div');
  const facts = h('dl', { class: 'facts' });
  const renderFacts = () => fill(facts,
    h('dt', {}, 'Key'), h('dd', {}, h('code', {}, a.agent_key)),
    h('dt', {}, 'Status'), h('dd', {}, badge(a.status, a.status === 'active')),
    h('dt', {}, 'Provider'), h('dd', {}, providerName(providers, a.provider_id)),
    h('dt', {}, 'Model'), h('dd', {}, h('code', {}, a.model)),
    h('dt', {}, 'Fallbacks'), h('dd', { id: 'agent-fallbacks' }, fallbackSummary(a, providers)),
    h('dt', {}, 'Max tokens'), h('dd', {}, a.other_config?.max_tokens ? num(a.other_config.max_tokens) : 'the provider’s'),
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
        h('a', { class: 'button secondary', href: '#/traces?agent=' + a.id }, 'Traces'),
        isAdmin(me) ? h('a', { class: 'button secondary', id: 'agent-budget', href: '#/gw/budgets' + q({ type: 'agent', id: a.id }) }, 'Budget') : null,
        del)),
    h('section', { class: 'card' }, h('h2', {}, 'Sharing'), shares, shareForm, serr)),
    promptForm,
    a.owner_id === me.id && providers.length ? fallbackEditor(a, providers, (updated) => { a = updated; renderFacts(); }) : null);
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
        res.budget_remaining ? h('span', { class: 'budget-left' }, remainingText(res.budget_remaining) + ' · ') : null,
        h('a', { href: '#/traces/' + encodeURIComponent(res.run_id), class: 'trace-link' }, 'trace')));
      status.textContent = '';
      showCost(1);
    } catch (x) {
      if (!out.textContent) answer.remove();
      status.textContent = '';
      // A budget's refusal says which budget; the usage page shows them all.
      if (x instanceof APIError && x.code === 'RESOURCE_EXHAUSTED') {
        err.replaceChildren(errorBox(x), h('p', { class: 'muted', id: 'chat-refused' }, 'Nothing was sent to the provider. ',
          h('a', { href: '#/usage' }, 'See your budgets'), '.'));
        return;
      }
      throw x;
    } finally {
      answer.classList.remove('streaming');
      send.disabled = false;
    }
  }) }, input, h('div', { class: 'actions' }, status, send));
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
  });
  // The session's cost with its runs and their unpriced calls: the sum
  // of its runs' traces. A run is recorded just after its answer: after
  // a turn, read again until it shows (grow: how many more runs to wait
  // for).
  const cost = h('span', { id: 'chat-cost' });
  let runs = 0;
  const showCost = async (grow = 0) => {
    for (let i = 0; i < 8; i++) {
      let c;
      try { c = await sessionCost(a.id, sessionKey); } catch { return; } // a cost is a nicety
      if (c.runs >= runs + grow || i === 7) {
        runs = c.runs;
        fill(cost, c.runs ? [' · cost ', h('strong', { 'data-cost-usd': c.cost }, (c.all ? '' : '≥ ') + usd(c.cost)),
          ` over ${num(c.runs)} run${c.runs === 1 ? '' : 's'}`, c.unpriced ? [' ', badge(`${c.unpriced} unpriced`, false)] : null] : null);
        return;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  };
  await showCost();
  page(`Chat with ${a.display_name || a.agent_key}`,
    h('p', { class: 'muted' }, 'Session ', h('code', { id: 'chat-session' }, sessionKey), cost, ' · ',
      h('a', { href: '#/chat/' + encodeURIComponent(a.agent_key) }, 'new session'), ' · ',
      h('a', { href: '#/sessions' }, 'all sessions')),
    h('section', { class: 'card' }, log, form), err);
  input.focus();
}

// remainingText reads the X-Gateway-Budget-Remaining value
// ("usd=1.234567;tokens=12000": the least left among the run's budgets).
function remainingText(v) {
  const parts = Object.fromEntries(String(v).split(';').map((p) => p.split('=')));
  const left = [];
  if (parts.usd != null) left.push(usd(parts.usd));
  if (parts.tokens != null) left.push(num(parts.tokens) + ' tokens');
  return left.length ? `budget left ${left.join(', ')}` : '';
}

// runCosts sums the cost of the caller's runs (GET /v1/traces: each run
// has its cost and its session) per agent and session, newest first, up
// to five pages, with the runs and unpriced calls the sessions API does
// not count. all is whether every matching run was read; oldest the start
// of the oldest read.
async function runCosts(filter) {
  const per = new Map();
  let offset = 0, total = 0, oldest = null;
  for (let i = 0; i < 5; i++) {
    const r = await gw('GET', '/traces' + q({ ...filter, limit: 200, offset }));
    total = r.total;
    for (const t of r.data) {
      const k = t.agent_id + '|' + t.session_key;
      const c = per.get(k) || { cost: 0, runs: 0, unpriced: 0 };
      c.cost += t.cost_usd || 0;
      c.runs++;
      if (t.price_known === false) c.unpriced++;
      per.set(k, c);
      oldest = t.start_time;
    }
    offset += r.data.length;
    if (offset >= total || r.data.length === 0) break;
  }
  return { per, all: offset >= total, oldest };
}

// sessionCost is one session's cost and runs.
async function sessionCost(agentID, key) {
  const r = await runCosts({ agent_id: agentID, session_key: key });
  return { ...(r.per.get(agentID + '|' + key) || { cost: 0, runs: 0, unpriced: 0 }), all: r.all };
}

async function sessionsPage(me) {
  const names = await agentNames();
  const r = await gw('GET', '/sessions' + q({ limit: 100 }));
  // A session's cost is what its turns' calls cost when they ran (the
  // sessions API sums it; turns recorded before prices count 0).
  const costCell = (s) => usd(s.cost_usd || 0);
  page('Sessions', table('sessions', ['Session', 'Agent', 'User', 'Channel', 'Messages', 'Tokens', 'Cost', 'Updated'],
    r.data.map((s) => {
      const agent = names.get(s.agent_id) || s.agent_id;
      return h('tr', { 'data-session': s.key },
        h('td', {}, h('a', { href: `#/chat/${encodeURIComponent(agent)}/${encodeURIComponent(s.key)}` }, s.label || s.key)),
        h('td', {}, agent), h('td', {}, person(s.user_id)),
        h('td', {}, s.channel || '—'), h('td', { class: 'num' }, num(s.message_count)),
        h('td', { class: 'num' }, `${num(s.prompt_tokens)} / ${num(s.completion_tokens)}`),
        h('td', { class: 'num session-cost' }, costCell(s)),
        h('td', {}, when(s.updated_at)));
    }), 'No sessions yet: chat with an agent.'),
  h('p', { class: 'muted' }, `${r.total} in all. A session’s cost is the sum of its runs’ (from the traces).`));
}
