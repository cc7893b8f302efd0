// gatehouse console, the gateway's admin pages (gateway API keys, tools
// and MCP servers, access requests, channels, activity; the providers
// pages are gwproviders.js, the budgets page gwbudgets.js) and the
// management access tokens page (/api/tokens).

import { h, api, APIError, when, guarded, onSubmit, confirmDialog, revealPanel, page } from './app.js';
import { gw, q, isAdmin, person, agentNames, table, badge, adminPage } from './gwlib.js';
import { providersPage } from './gwproviders.js';
import { budgetsPage } from './gwbudgets.js';

// --- management access tokens (/api/tokens) -------------------------------

export async function tokensPage(me) {
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
  // Scopes rank admin > write > read (each includes the ones below it);
  // admin is offered to admins only (the server refuses more than the role).
  const scopes = h('select', { id: 'token-scope' },
    h('option', { value: 'read' }, 'read: look, change nothing'),
    h('option', { value: 'write', selected: true }, 'write: manage my keys'),
    isAdmin(me) ? h('option', { value: 'admin' }, 'admin: users, services, every key') : null);
  const expires = h('input', { type: 'date', id: 'token-expires' });
  const cerr = h('div');
  const form = h('form', { class: 'card inline', id: 'create-token', onsubmit: onSubmit(cerr, async () => {
    const body = { name: name.value.trim(), scopes: [scopes.value] };
    if (expires.value) body.expiresAt = new Date(expires.value + 'T23:59:59').toISOString();
    const r = await api('POST', '/api/tokens', body);
    revealSlot.replaceChildren(revealPanel(`Token “${r.name || body.name}” created`, r.token,
      h('p', { class: 'muted' }, 'Use it as Authorization: Bearer <token> on /api/…; the API is described at ', h('a', { href: '/api/docs' }, '/api/docs'), '.')));
    name.value = '';
    await refresh();
  }) }, h('h2', {}, 'Create a token'), h('label', {}, 'Name', name), h('label', {}, 'Scope', scopes),
  h('label', {}, 'Expires (optional)', expires), h('button', { type: 'submit' }, 'Create token'), cerr);
  await guarded(err, refresh);
  page('Access tokens', h('p', { class: 'muted' }, 'Tokens for scripts and CI against the management API; each is shown once.'),
    missing ? null : form, revealSlot, err, list);
}

// --- gateway admin --------------------------------------------------------

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
      h('td', {}, k.revoked ? null : h('div', { class: 'actions' },
        h('a', { class: 'button secondary key-budget', href: '#/gw/budgets' + q({ type: 'api_key', id: k.id }) }, 'Budget'),
        h('button', { type: 'button', class: 'danger', onclick: () => guarded(err, async () => {
          if (!await confirmDialog('Revoke this API key?', `“${k.name}” stops working at once.`, 'Revoke')) return;
          await gw('DELETE', '/api-keys/' + k.id);
          await refresh();
        }) }, 'Revoke'))))), 'No API keys yet.'));
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
  }) }, h('h3', {}, 'Create a gateway API key'), h('label', {}, 'Name', name), h('label', {}, 'Scope', scope),
  h('label', {}, 'User', user), h('button', { type: 'submit' }, 'Create'), cerr);
  adminPage('api-keys', 'Gateway API keys', form, revealSlot, err, list);
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
  }) }, h('h3', {}, 'Register an MCP server'), h('label', {}, 'Name', name), h('label', {}, 'Transport', transport),
  h('label', { class: 'wide' }, 'URL or command', target), h('button', { type: 'submit' }, 'Register'));
  adminPage('tools', 'Tools and MCP servers', h('h3', {}, 'MCP servers'),
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
    h('h3', {}, 'Custom tools'),
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
  adminPage('requests', 'MCP access requests', h('div', { class: 'row' },
    h('p', { class: 'muted' }, 'Users ask for an MCP server on their agents page; approve or deny here.'),
    h('label', { class: 'inline-check' }, 'Show', status)), err, list);
  await refresh();
}

async function channelsPage() {
  const names = await agentNames();
  const cs = (await gw('GET', '/channel-instances')).data;
  adminPage('channels', 'Channel instances', table('channels', ['Channel', 'Type', 'Agent', 'Enabled', 'Created'], cs.map((c) => h('tr', {},
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
  adminPage('activity', 'Activity log', form, err, list);
  await load();
}

export const adminPages = {
  providers: providersPage, 'api-keys': apiKeysPage, budgets: budgetsPage, tools: toolsPage, requests: requestsPage,
  channels: channelsPage, activity: activityPage,
};
