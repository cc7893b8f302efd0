// gatehouse console: one page over the JSON API the seed defines
// (/api/auth, /api/keys, /api/users) and, through the bridge below
// /api/gateway, the agent gateway's operations (gw.js), routed by the URL
// fragment.
//
// A full key (from create or rotate) lives only in the DOM of the panel
// that reveals it: never in storage, a cookie or the URL, and gone when
// the panel is dismissed or the page changes. Everything user-supplied is
// inserted as text, never as HTML.

import { gatewayRoute, gatewayNav } from './gw.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
let me = null; // the logged-in user: {id, email, role, plan, licenseActive}
let timers = []; // intervals of the current page, cleared on navigation
let leaving = []; // cleanups of the current page (a socket to close), run on navigation
let lastList = '#/keys'; // the key list a key page returns to

// h builds an element: h('a', {href: '#/'}, 'text', child, ...).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  return fill(el, ...children);
}

// fill replaces el's children, skipping null and flattening arrays.
export function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c != null && c !== false));
  return el;
}

export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// api calls the JSON API with the session cookie; an error answer
// ({error, message}, or the gateway's {error: {code, message}}) becomes
// an APIError.
export async function api(method, path, body) {
  const opt = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    opt.headers['Content-Type'] = 'application/json';
    opt.body = JSON.stringify(body);
  }
  const r = await fetch(path, opt);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!r.ok) {
    if (r.status === 401 && path !== '/api/auth/login') {
      me = null;
      go('#/login');
    }
    const e = data && typeof data.error === 'object' && data.error ? data.error : data;
    throw new APIError(r.status, (e && (e.code || e.error)) || 'HTTP_' + r.status,
      (e && e.message) || r.statusText || 'request failed');
  }
  return data;
}

export function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

// --- formatting ---------------------------------------------------------

export function when(iso) {
  if (!iso) return '—';
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

function countdown(iso) {
  let s = Math.max(0, Math.round((new Date(iso) - Date.now()) / 1000));
  const hh = Math.floor(s / 3600); s -= hh * 3600;
  const mm = Math.floor(s / 60); s -= mm * 60;
  return `${hh}h ${String(mm).padStart(2, '0')}m ${String(s).padStart(2, '0')}s`;
}

// keyStatus is the status column: revoked, expired, in grace (the
// previous secret still works after a rotation) or active.
function keyStatus(k) {
  const now = Date.now();
  if (!k.isActive) return { code: 'revoked', text: 'revoked' };
  if (k.expiresAt && new Date(k.expiresAt) <= now) return { code: 'expired', text: 'expired' };
  if (k.gracePeriodEndsAt && new Date(k.gracePeriodEndsAt) > now) {
    return { code: 'grace', text: 'in grace until ' + when(k.gracePeriodEndsAt) };
  }
  return { code: 'active', text: 'active' };
}

function statusBadge(k) {
  const s = keyStatus(k);
  return h('span', { class: 'status status-' + s.code, 'data-status': s.code,
    title: s.code === 'grace' ? 'rotated: the previous key also works until then' : null }, s.text);
}

// guarded runs fn and shows its error, if any, in slot (cleared first).
export async function guarded(slot, fn) {
  slot.replaceChildren();
  try {
    await fn();
  } catch (x) {
    slot.replaceChildren(errorBox(x));
  }
}

// onSubmit is a form's submit handler: fn, guarded by slot.
export const onSubmit = (slot, fn) => (e) => {
  e.preventDefault();
  return guarded(slot, fn);
};

export function errorBox(err) {
  return h('p', { class: 'error', role: 'alert' },
    err instanceof APIError ? `${err.message} (${err.code})` : String(err.message || err));
}

// --- building blocks ----------------------------------------------------

// confirmDialog asks before a destructive action; resolves true on yes.
export function confirmDialog(title, text, yes) {
  return new Promise((resolve) => {
    const dlg = h('dialog', { class: 'confirm' },
      h('h2', {}, title), h('p', {}, text),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'secondary', 'data-action': 'cancel',
          onclick: () => { dlg.close(); resolve(false); } }, 'Cancel'),
        h('button', { type: 'button', class: 'danger', 'data-action': 'confirm',
          onclick: () => { dlg.close(); resolve(true); } }, yes)));
    dlg.addEventListener('close', () => { dlg.remove(); resolve(false); });
    document.body.append(dlg);
    dlg.showModal();
  });
}

// revealPanel shows a full key once, with a copy button. The key is held
// only by this panel's input; Done removes the panel.
export function revealPanel(title, key, extra) {
  const input = h('input', { class: 'secret', id: 'revealed-key', readonly: true, value: key,
    'aria-label': 'the full API key', spellcheck: 'false', autocomplete: 'off' });
  const copied = h('span', { class: 'copied', 'aria-live': 'polite' });
  const panel = h('section', { class: 'reveal', 'aria-labelledby': 'reveal-title' },
    h('h2', { id: 'reveal-title' }, title),
    h('p', { class: 'warning' }, 'Copy this key now. You will not see it again: gatehouse keeps only its hash.'),
    h('div', { class: 'secret-row' }, input,
      h('button', { type: 'button', id: 'copy-key', onclick: async () => {
        try {
          await navigator.clipboard.writeText(input.value);
        } catch {
          input.select(); // no clipboard API (plain http off localhost): select it for Ctrl+C
          document.execCommand('copy');
        }
        copied.textContent = 'Copied.';
      } }, 'Copy'), copied),
    extra || null,
    h('button', { type: 'button', id: 'reveal-done', onclick: () => { input.value = ''; panel.remove(); } },
      'I have saved it'));
  return panel;
}

// every(ms, fn) runs fn every ms while the page shows; onLeave(fn) runs
// fn when it goes.
export const every = (ms, fn) => timers.push(setInterval(fn, ms));
export const onLeave = (fn) => leaving.push(fn);

export function page(title, ...children) {
  fill(main, h('h1', {}, title), children);
  document.title = title + ' · gatehouse';
}

function renderNav() {
  fill(nav);
  if (!me) return;
  fill(nav,
    h('a', { href: '#/keys' }, 'My keys'),
    me.role === 'admin' ? h('a', { href: '#/users' }, 'Users') : null,
    h('a', { href: '#/tokens' }, 'Tokens'),
    gatewayNav(me),
    h('span', { class: 'who', id: 'who' }, `${me.email} (${me.role})`),
    h('button', { type: 'button', class: 'link', id: 'logout', onclick: logout }, 'Log out'));
}

// --- pages --------------------------------------------------------------

function loginPage() {
  const err = h('div');
  const email = h('input', { type: 'email', name: 'email', id: 'email', required: true, autocomplete: 'username' });
  const password = h('input', { type: 'password', name: 'password', id: 'password', required: true,
    autocomplete: 'current-password' });
  const form = h('form', { class: 'card narrow', id: 'login-form', onsubmit: onSubmit(err, async () => {
    const r = await api('POST', '/api/auth/login', { email: email.value, password: password.value });
    me = r.user;
    renderNav();
    go('#/keys');
  }) },
  h('label', {}, 'Email', email), h('label', {}, 'Password', password),
  h('button', { type: 'submit' }, 'Log in'), err);
  page('Log in', form);
  email.focus();
}

async function logout() {
  try { await api('POST', '/api/auth/logout'); } catch { /* the session is gone either way */ }
  me = null;
  renderNav();
  go('#/login');
}

// keysPage lists the keys of the logged-in user, or, for an admin, of
// the user viewAs.
async function keysPage(viewAs) {
  let owner = null;
  if (viewAs) {
    const users = (await api('GET', '/api/users')).users;
    owner = users.find((u) => u.id === viewAs);
    if (!owner) throw new APIError(404, 'USER_NOT_FOUND', 'no such user');
  }
  const list = h('div', { id: 'key-list' });
  const revealSlot = h('div', { id: 'reveal-slot' });
  const refresh = async () => {
    const q = viewAs ? '?viewAs=' + encodeURIComponent(viewAs) : '';
    const keys = (await api('GET', '/api/keys' + q)).keys;
    if (keys.length === 0) {
      list.replaceChildren(h('p', { class: 'empty' }, viewAs ? 'This user has no keys.' : 'No keys yet: create one above.'));
      return;
    }
    list.replaceChildren(h('table', { class: 'keys' },
      h('thead', {}, h('tr', {}, ['Name', 'Key', 'Rate limit', 'Status', 'Last used', 'Requests']
        .map((t) => h('th', { scope: 'col', class: t === 'Rate limit' || t === 'Requests' ? 'num' : null }, t)))),
      h('tbody', {}, keys.map((k) => h('tr', { 'data-key-id': k.id },
        h('td', {}, h('a', { href: '#/keys/' + k.id, class: 'key-name' }, k.name)),
        h('td', {}, h('code', {}, k.keyPreview)),
        h('td', { class: 'num' }, `${k.rateLimit.toLocaleString()}/h`),
        h('td', {}, statusBadge(k)),
        h('td', {}, when(k.lastUsedAt)),
        h('td', { class: 'num' }, k.usageCount.toLocaleString()))))));
  };

  let create = null;
  if (!viewAs) {
    const err = h('div');
    const name = h('input', { name: 'name', id: 'key-name', required: true, maxlength: 100,
      placeholder: 'e.g. ci-deploy' });
    const expires = h('input', { type: 'date', name: 'expiresAt', id: 'key-expires' });
    create = h('form', { class: 'card inline', id: 'create-key', onsubmit: onSubmit(err, async () => {
      const body = { name: name.value.trim() };
      if (expires.value) body.expiresAt = new Date(expires.value + 'T23:59:59').toISOString();
      const r = await api('POST', '/api/keys', body);
      revealSlot.replaceChildren(revealPanel(`Key “${r.name}” created`, r.key));
      name.value = '';
      expires.value = '';
      await refresh();
    }) },
    h('h2', {}, 'Create a key'),
    h('label', {}, 'Name', name), h('label', {}, 'Expires (optional)', expires),
    h('button', { type: 'submit' }, 'Create key'), err);
  }
  lastList = location.hash || '#/keys';
  page(viewAs ? `Keys of ${owner.email}` : 'My keys', create, revealSlot, list);
  await refresh();
}

const dayChoices = [1, 7, 14, 30];

async function keyPage(id) {
  const k = (await api('GET', '/api/keys/' + id)).key;
  const revealSlot = h('div', { id: 'reveal-slot' });
  const facts = h('dl', { class: 'facts' });
  const windowBox = h('section', { class: 'card', id: 'live-window' });
  const chartBox = h('div', { class: 'chart', id: 'usage-chart' });
  const table = h('table', { class: 'usage-table', id: 'usage-table' });
  const days = h('select', { id: 'usage-days', 'aria-label': 'days of usage' },
    dayChoices.map((d) => h('option', { value: d }, d === 1 ? 'today' : `last ${d} days`)));
  days.value = '7';
  let key = k;

  const renderFacts = () => {
    const graceLeft = key.gracePeriodEndsAt && new Date(key.gracePeriodEndsAt) > Date.now();
    fill(facts,
      h('dt', {}, 'Status'), h('dd', {}, statusBadge(key)),
      h('dt', {}, 'Prefix'), h('dd', {}, h('code', {}, key.prefix)),
      h('dt', {}, 'Rate limit'), h('dd', {}, `${key.rateLimit.toLocaleString()} requests per hour (sliding)`),
      h('dt', {}, 'Requests'), h('dd', { id: 'usage-count' }, key.usageCount.toLocaleString()),
      h('dt', {}, 'Last used'), h('dd', {}, when(key.lastUsedAt)),
      h('dt', {}, 'Created'), h('dd', {}, when(key.createdAt)),
      h('dt', {}, 'Expires'), h('dd', {}, key.expiresAt ? when(key.expiresAt) : 'never'),
      key.rotatedAt ? [h('dt', {}, 'Rotated'), h('dd', {}, when(key.rotatedAt))] : null,
      graceLeft ? [h('dt', {}, 'Old key stops'),
        h('dd', {}, h('span', { id: 'grace-countdown', 'data-until': key.gracePeriodEndsAt },
          countdown(key.gracePeriodEndsAt)), ' (', when(key.gracePeriodEndsAt), ')')] : null);
  };

  let plot = null;
  const loadUsage = async () => {
    const u = await api('GET', `/api/keys/${id}/usage?days=${days.value}`);
    const rl = u.rateLimit;
    windowBox.replaceChildren(
      h('h2', {}, 'This hour'),
      h('p', {}, h('strong', { id: 'window-used' }, rl.used.toLocaleString()), ' of ',
        h('span', { id: 'window-limit' }, rl.limit.toLocaleString()), ' requests used in the sliding hour; ',
        h('span', { id: 'window-remaining' }, rl.remaining.toLocaleString()), ' left.'),
      h('progress', { max: rl.limit, value: rl.used, 'aria-label': 'rate limit used' }),
      h('p', { class: 'muted' }, rl.resetAt
        ? ['The oldest of them leaves the window at ', when(rl.resetAt), '.']
        : 'The window is empty.'));
    const rows = u.dailyUsage;
    table.replaceChildren(
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Day (UTC)'), h('th', { scope: 'col', class: 'num' }, 'Requests'))),
      h('tbody', {}, rows.map((d) => h('tr', { 'data-date': d.date },
        h('td', {}, d.date), h('td', { class: 'num' }, d.count.toLocaleString())))));
    chartBox.dataset.total = String(rows.reduce((s, d) => s + d.count, 0));
    const xs = rows.map((d) => Date.parse(d.date + 'T00:00:00Z') / 1000);
    const ys = rows.map((d) => d.count);
    if (plot) plot.destroy();
    chartBox.replaceChildren();
    plot = new uPlot({
      width: Math.max(320, chartBox.clientWidth || 640), height: 220,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'), // the API's days are UTC days
      scales: { x: { time: true, range: (_u, lo, hi) => [lo - 43200, hi + 43200] }, y: { range: (_u, _lo, hi) => [0, Math.max(5, hi * 1.1)] } },
      axes: [{ incrs: [86400, 2 * 86400, 7 * 86400], values: (_u, ticks) => ticks.map((t) => new Date(t * 1000).toISOString().slice(5, 10)) },
        { label: 'requests' }],
      legend: { show: false },
      series: [{}, { label: 'requests', stroke: '#2563eb', fill: 'rgba(37,99,235,0.35)',
        paths: uPlot.paths.bars({ size: [0.6, 48] }), points: { show: false } }],
    }, [xs, ys], chartBox);
  };

  const reload = async () => {
    key = (await api('GET', '/api/keys/' + id)).key;
    renderFacts();
    renderActions();
    await loadUsage();
  };

  const err = h('div');
  const actions = h('div', { class: 'actions' });
  const act = (label, cls, handler) => h('button', { type: 'button', class: cls, id: 'key-' + label.toLowerCase(),
    onclick: () => guarded(err, handler) }, label);
  const renderActions = () => {
    fill(actions,
      key.isActive ? act('Rotate', '', async () => {
        if (!await confirmDialog('Rotate this key?', `A new key replaces “${key.name}”. The current key keeps working for the grace period, then stops.`, 'Rotate')) return;
        const r = await api('POST', `/api/keys/${id}/rotate`);
        await reload();
        const cd = h('p', {}, 'The previous key stops working in ',
          h('strong', { id: 'rotate-countdown' }, countdown(key.gracePeriodEndsAt)), '.');
        timers.push(setInterval(() => { cd.querySelector('strong').textContent = countdown(key.gracePeriodEndsAt); }, 1000));
        revealSlot.replaceChildren(revealPanel('New key', r.key, cd));
      }) : null,
      key.isActive ? act('Revoke', 'danger', async () => {
        if (!await confirmDialog('Revoke this key?', `“${key.name}” and any key in its grace period stop working at once. This cannot be undone.`, 'Revoke')) return;
        await api('POST', `/api/keys/${id}/revoke`);
        revealSlot.replaceChildren();
        await reload();
      }) : null,
      act('Delete', 'danger', async () => {
        if (!await confirmDialog('Delete this key?', `“${key.name}” is removed with its usage history. This cannot be undone.`, 'Delete')) return;
        await api('DELETE', `/api/keys/${id}`);
        go(lastList);
      }));
  };

  days.addEventListener('change', () => loadUsage().catch((x) => err.replaceChildren(errorBox(x))));
  renderFacts();
  renderActions();
  // Admins may rename a key and change its rate limit (PATCH is admin-only).
  let edit = null;
  if (me.role === 'admin') {
    const eerr = h('div');
    const ename = h('input', { id: 'edit-name', value: k.name, required: true, maxlength: 100 });
    const elimit = h('input', { id: 'edit-limit', type: 'number', min: 1, max: 1000000000, value: k.rateLimit, required: true });
    edit = h('details', { class: 'card' }, h('summary', {}, 'Edit (admin)'),
      h('form', { class: 'inline', id: 'edit-key', onsubmit: onSubmit(eerr, async () => {
        await api('PATCH', '/api/keys/' + id, { name: ename.value.trim(), rateLimit: Number(elimit.value) });
        await reload();
        main.querySelector('h1').textContent = key.name;
      }) },
      h('label', {}, 'Name', ename), h('label', {}, 'Requests per hour', elimit),
      h('button', { type: 'submit' }, 'Save'), eerr));
  }
  page(k.name, h('p', {}, h('a', { href: lastList }, '← back to the keys')),
    revealSlot, err, h('div', { class: 'grid' }, h('section', { class: 'card' }, facts, actions), windowBox), edit,
    h('section', { class: 'card' }, h('div', { class: 'row' }, h('h2', {}, 'Requests per day'), days), chartBox,
      h('details', {}, h('summary', {}, 'As a table'), table)));
  await loadUsage();
  timers.push(setInterval(() => {
    const c = document.getElementById('grace-countdown');
    if (c) c.textContent = countdown(c.dataset.until);
  }, 1000));
  timers.push(setInterval(() => { loadUsage().catch(() => {}); }, 15000));
}

async function usersPage() {
  const list = h('div', { id: 'user-list' });
  const err = h('div');
  const refresh = async () => {
    const users = (await api('GET', '/api/users')).users;
    list.replaceChildren(h('table', { class: 'users' },
      h('thead', {}, h('tr', {}, ['Email', 'Role', 'Plan', 'License', 'Key limit', 'Created', ''].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, users.map((u) => {
        // A refused change redraws the row as it is.
        const patch = (body) => guarded(err, () => api('PATCH', '/api/users/' + u.id, body)).then(refresh);
        const self = u.id === me.id;
        return h('tr', { 'data-user-id': u.id, 'data-email': u.email },
          h('td', {}, u.email),
          h('td', {}, h('select', { 'aria-label': 'role', class: 'user-role', disabled: self,
            onchange: (e) => patch({ role: e.target.value }) },
          ['user', 'admin'].map((r) => h('option', { value: r, selected: r === u.role }, r)))),
          h('td', {}, h('select', { 'aria-label': 'plan', class: 'user-plan', onchange: (e) => patch({ plan: e.target.value }) },
            ['standard', 'premium'].map((p) => h('option', { value: p, selected: p === u.plan }, p)))),
          h('td', {}, h('label', { class: 'switch' }, h('input', { type: 'checkbox', class: 'user-license',
            checked: u.licenseActive, onchange: (e) => patch({ licenseActive: e.target.checked }) }),
          u.licenseActive ? 'on' : 'off')),
          // The limit of the keys the user creates: an admin's, or the plan's (empty).
          h('td', {}, h('input', { type: 'number', min: 1, class: 'user-key-limit', 'aria-label': 'key limit per hour',
            placeholder: 'plan', value: u.keyRateLimit ?? '',
            onchange: (e) => patch({ keyRateLimit: e.target.value === '' ? null : Number(e.target.value) }) })),
          h('td', {}, when(u.createdAt)),
          h('td', {}, h('a', { href: `#/users/${u.id}/keys`, class: 'view-keys' }, 'View keys')));
      }))));
  };
  const email = h('input', { type: 'email', id: 'new-user-email', required: true });
  const password = h('input', { type: 'password', id: 'new-user-password', required: true, minlength: 8,
    autocomplete: 'new-password' });
  const role = h('select', { id: 'new-user-role' }, h('option', { value: 'user' }, 'user'), h('option', { value: 'admin' }, 'admin'));
  const plan = h('select', { id: 'new-user-plan' }, h('option', { value: 'standard' }, 'standard'), h('option', { value: 'premium' }, 'premium'));
  const license = h('input', { type: 'checkbox', id: 'new-user-license', checked: true });
  const cerr = h('div');
  const form = h('form', { class: 'card inline', id: 'create-user', onsubmit: onSubmit(cerr, async () => {
    await api('POST', '/api/users', { email: email.value.trim(), password: password.value, role: role.value,
      plan: plan.value, licenseActive: license.checked });
    email.value = '';
    password.value = '';
    await refresh();
  }) },
  h('h2', {}, 'Create a user'),
  h('label', {}, 'Email', email), h('label', {}, 'Password', password),
  h('label', {}, 'Role', role), h('label', {}, 'Plan', plan),
  h('label', { class: 'check' }, license, 'License active'),
  h('button', { type: 'submit' }, 'Create user'), cerr);
  page('Users', form, err, list);
  await refresh();
}

// --- routing ------------------------------------------------------------

async function route() {
  delete main.dataset.ready;
  timers.forEach(clearInterval);
  timers = [];
  leaving.forEach((fn) => fn());
  leaving = [];
  document.querySelectorAll('dialog').forEach((d) => d.remove());
  const path = location.hash.replace(/^#/, '') || '/keys';
  if (!me && path !== '/login') {
    try {
      me = (await api('GET', '/api/auth/me')).user;
    } catch {
      return; // api sent us to #/login
    }
    renderNav();
  }
  let m;
  try {
    if (path === '/login') loginPage();
    else if (path === '/keys') await keysPage(null);
    else if ((m = path.match(/^\/keys\/([0-9a-f-]{36})$/))) await keyPage(m[1]);
    else if (path === '/users' && me.role === 'admin') await usersPage();
    else if ((m = path.match(/^\/users\/([0-9a-f-]{36})\/keys$/)) && me.role === 'admin') await keysPage(m[1]);
    else if (await gatewayRoute(path, me)) { /* a gateway page (gw.js) */ }
    else page('Not found', h('p', {}, 'No such page. ', h('a', { href: '#/keys' }, 'Your keys')));
  } catch (x) {
    if (x instanceof APIError && x.status === 401) return;
    page('Something went wrong', errorBox(x));
  }
  main.dataset.ready = path; // the browser test waits on this
}

window.addEventListener('hashchange', route);
route();
