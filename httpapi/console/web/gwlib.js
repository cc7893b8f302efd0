// gatehouse console: what the gateway's pages share (gw.js,
// gwobserve.js, gwadmin.js, gwbudgets.js, gwproviders.js,
// gwfallbacks.js): calls through the bridge below /api/gateway, query
// strings, numbers and money, tables, badges, the admin pages' frame,
// and the names of agents and users.

import { h, api, page } from './app.js';

export const GW = '/api/gateway/v1';
export const gw = (method, path, body) => api(method, GW + path, body);
export const q = (params) => {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v != null) s.set(k, v);
  const t = s.toString();
  return t ? '?' + t : '';
};
export const isAdmin = (me) => me.role === 'admin';
export const num = (n) => Number(n || 0).toLocaleString();
export const ms = (d) => (d >= 1000 ? (d / 1000).toFixed(2) + ' s' : `${d} ms`);

// usd shows an amount of US dollars: cents from a dollar up, three
// significant digits below (an LLM call often costs a fraction of a cent).
export function usd(n) {
  const v = Number(n || 0);
  if (v === 0) return '$0.00';
  if (Math.abs(v) >= 1) return '$' + v.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  return '$' + v.toLocaleString(undefined, { maximumSignificantDigits: 3, maximumFractionDigits: 9 });
}

// costText is a run's or a span's cost: its amount, "unpriced" when a
// model had no price (price_known false: it counts $0, visibly), and "—"
// when nothing was priced (no call, or a run recorded before prices).
export function costText(x) {
  if (x.price_known === false) return h('span', { class: 'cost unpriced', title: 'a model without a price: counted as $0' }, usd(x.cost_usd) + ' · unpriced');
  if (x.price_known == null && !x.cost_usd) return '—';
  return h('span', { class: 'cost' }, usd(x.cost_usd));
}

// people maps console user ids (gateway user ids) to emails, for admins
// (GET /api/users); person shows a user id as "me", an email or the id.
let people = new Map();
let self = null;
export function person(id) {
  if (!id) return '—';
  if (id === self) return 'me';
  return people.get(id) || h('code', {}, id);
}

// loadPeople sets who "me" is and, for an admin, reads every user's email.
export async function loadPeople(me, wanted) {
  self = me.id;
  people = new Map();
  if (isAdmin(me) && wanted) {
    try { people = new Map((await api('GET', '/api/users')).users.map((u) => [u.id, u.email])); } catch { /* ids then */ }
  }
}

// agentNames maps agent ids to their keys (for traces, sessions, usage).
export async function agentNames() {
  const names = new Map();
  try {
    for (const a of (await gw('GET', '/agents')).data) names.set(a.id, a.agent_key);
  } catch { /* a name is a nicety */ }
  return names;
}

export function table(cls, heads, rows, empty) {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h('table', { class: cls },
    h('thead', {}, h('tr', {}, heads.map((t) => h('th', { scope: 'col', class: /^(Runs|Tokens|In|Out|Messages|Duration|Spans|Cache|Reasoning|Attempt|Cost|Unpriced|Spent|Reserved|Max)/.test(t) ? 'num' : null }, t)))),
    h('tbody', {}, rows));
}

export function badge(text, good) {
  return h('span', { class: 'status status-' + (good ? 'active' : 'revoked') }, text);
}


// adminTabs are the gateway admin's pages: route and name.
export const adminTabs = [['providers', 'Providers'], ['api-keys', 'API keys'], ['budgets', 'Budgets'], ['tools', 'Tools & MCP'],
  ['requests', 'Access requests'], ['channels', 'Channels'], ['activity', 'Activity']];

// adminPage renders a gateway admin page: the "Gateway admin" title, the
// tabs (the current one marked), then the page's own heading, title (an
// h2 with id admin-heading, which the tab bar alone does not give a
// reader or a screen reader), and children.
export function adminPage(tab, title, ...children) {
  page('Gateway admin', h('nav', { class: 'tabs', 'aria-label': 'gateway admin' },
    adminTabs.map(([id, label]) => h('a', { href: '#/gw/' + id, class: id === tab ? 'current' : null, 'aria-current': id === tab ? 'page' : null }, label))),
  h('h2', { id: 'admin-heading', class: 'page-heading' }, title), children);
  document.title = `${title} · Gateway admin · gatehouse`;
}
