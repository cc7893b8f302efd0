// gatehouse console, budgets (docs/budgets.md): a bar per budget that
// binds the user (the usage page), every budget with its spend (the usage
// page, for admins), and the admin page that sets, edits and deletes
// budgets on users, agents and gateway API keys. Everything goes through
// /v1/budgets on the bridge: GET ?mine=true for a user's own (their user
// budget or the configured default, their keys', their agents'), GET,
// POST, PUT and DELETE for an admin.

import { h, api, fill, when, guarded, onSubmit, confirmDialog } from './app.js';
import { gw, q, isAdmin, num, usd, person, table, badge, adminPage } from './gwlib.js';

const periodNames = { day: 'Daily', month: 'Monthly', total: 'Total' };
const subjectTypes = [['user', 'user'], ['agent', 'agent'], ['api_key', 'gateway API key']];

// subjectNames maps agent ids to their keys and API key ids to their
// names, as far as the caller may list them (an admin: every agent and
// key; a user: their agents).
export async function subjectNames(me) {
  const agents = new Map();
  const keys = new Map();
  const admin = isAdmin(me);
  try {
    for (const a of (await gw('GET', '/agents' + (admin ? '?view=all' : ''))).data) agents.set(a.id, a);
  } catch { /* an id then */ }
  if (admin) {
    try {
      for (const k of (await gw('GET', '/api-keys')).data) keys.set(k.id, k);
    } catch { /* an id then */ }
  }
  return { agents, keys };
}

// subjectLabel names a budget's subject: the user ("me", an email or the
// id), the agent's key, the API key's name.
export function subjectLabel(s, names) {
  if (s.type === 'user') return ['user ', person(s.id)];
  if (s.type === 'agent') {
    const a = names.agents.get(s.id);
    return ['agent ', a ? h('a', { href: '#/agents/' + a.id }, a.agent_key) : h('code', {}, s.id)];
  }
  const k = names.keys.get(s.id);
  return ['API key ', k ? k.name : h('code', {}, s.id)];
}

function resetsText(b) {
  return b.resets_at ? ['resets ', when(b.resets_at)] : 'never resets';
}

// caps are the budget's capped amounts, each with what is spent and
// reserved against it: USD and tokens, whichever is set.
function caps(b) {
  const out = [];
  if (b.max_usd != null) out.push({ kind: 'usd', label: 'USD', max: b.max_usd, spent: b.spent_usd, reserved: b.reserved_usd, fmt: usd });
  if (b.max_tokens != null) out.push({ kind: 'tokens', label: 'Tokens', max: b.max_tokens, spent: b.spent_tokens, reserved: b.reserved_tokens, fmt: num });
  return out;
}

const pct = (part, whole) => (whole > 0 ? Math.min(100, 100 * part / whole) : (part > 0 ? 100 : 0));

// meter draws spent and reserved against a cap as an SVG bar (SVG
// attributes: the CSP forbids inline styles), with the numbers for a
// screen reader.
function meter(c) {
  const ns = 'http://www.w3.org/2000/svg';
  const el = (tag, attrs) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    return e;
  };
  const s = pct(c.spent, c.max);
  const r = Math.min(100 - s, pct(c.reserved, c.max));
  const level = s >= 100 ? 'full' : s >= 80 ? 'high' : 'ok';
  const svg = el('svg', { viewBox: '0 0 100 6', preserveAspectRatio: 'none', class: 'budget-bar level-' + level,
    role: 'meter', 'aria-valuemin': 0, 'aria-valuemax': c.max, 'aria-valuenow': Math.min(c.spent, c.max),
    'aria-valuetext': `${c.fmt(c.spent)} of ${c.fmt(c.max)} spent, ${c.fmt(c.reserved)} reserved`,
    'aria-label': c.label + ' spent' });
  svg.append(el('rect', { x: 0, y: 0, width: 100, height: 6, class: 'bar-track' }));
  svg.append(el('rect', { x: 0, y: 0, width: s, height: 6, class: 'bar-spent' }));
  if (r > 0) svg.append(el('rect', { x: s, y: 0, width: r, height: 6, class: 'bar-reserved' }));
  return svg;
}

// pctText is the share of a cap spent: whole percents, two decimals
// below one, "< 0.01 %" for a sliver.
function pctText(part, whole) {
  const p = pct(part, whole);
  if (p === 0 || p >= 1) return `${Math.floor(p)} %`;
  return p < 0.01 ? '< 0.01 %' : `${p.toFixed(2)} %`;
}

// capRow is one cap of a budget: the numbers, then the bar.
function capRow(c) {
  return h('div', { class: 'budget-cap', 'data-cap': c.kind, 'data-spent': c.spent, 'data-reserved': c.reserved, 'data-max': c.max },
    h('div', { class: 'row' }, h('span', { class: 'cap-label' }, c.label),
      h('span', { class: 'budget-numbers' }, h('strong', {}, c.fmt(c.spent)), ` of ${c.fmt(c.max)} spent`,
        c.reserved ? ` · ${c.fmt(c.reserved)} reserved by calls in flight` : '',
        ` · ${pctText(c.spent, c.max)}`)),
    meter(c));
}

// budgetCard is a bar per capped amount of budget b.
export function budgetCard(b, names) {
  return h('section', { class: 'budget', 'data-budget-id': b.id, 'data-subject-type': b.subject.type, 'data-period': b.period,
    'data-default': b.default ? 'true' : null },
  h('div', { class: 'row' }, h('h3', {}, `${periodNames[b.period] || b.period} budget of `, subjectLabel(b.subject, names),
    b.default ? [' ', badge('default', true)] : null), h('span', { class: 'muted budget-resets' }, resetsText(b))),
  caps(b).map(capRow),
  b.max_tokens_per_minute != null ? h('p', { class: 'muted budget-tpm' }, `At most ${num(b.max_tokens_per_minute)} tokens in any minute.`) : null,
  b.default ? h('p', { class: 'hint' }, 'The gateway’s default budget, for every user without one of their own.') : null);
}

// myBudgets is the usage page's "My budgets": a bar per budget that binds
// the user (GET /v1/budgets?mine=true).
export async function myBudgets(me, names) {
  const bs = (await gw('GET', '/budgets' + q({ mine: true }))).data;
  return h('section', { class: 'card', id: 'usage-budgets', 'aria-labelledby': 'usage-budgets-title' },
    h('h2', { id: 'usage-budgets-title' }, 'My budgets'),
    bs.length ? bs.map((b) => budgetCard(b, names))
      : h('p', { class: 'empty' }, 'No budget binds you, your keys or your agents.'),
    bs.length ? h('p', { class: 'hint' }, 'Before each call, its worst case (the prompt’s bytes and the answer’s max_tokens) is reserved; ' +
      'a call that does not fit is refused, so a budget refuses a little before it is fully spent.') : null);
}

// capCell is "spent / max" of one amount, "—" when it is not capped.
function capCell(spent, max, fmt) {
  return max == null ? h('td', { class: 'num muted' }, spent ? fmt(spent) + ' (no cap)' : '—')
    : h('td', { class: 'num' }, `${fmt(spent)} / ${fmt(max)}`);
}

// budgetTable lists budgets with their spend; actions, if given, adds a
// cell of buttons to each row.
export function budgetTable(id, bs, names, actions) {
  return table(id, ['Subject', 'Period', 'Spent / max USD', 'Spent / max tokens', 'Max tokens/min', 'Reserved', 'Resets', actions ? '' : null].filter((x) => x != null),
    bs.map((b) => h('tr', { 'data-budget-id': b.id, 'data-subject-type': b.subject.type, 'data-subject-id': b.subject.id,
      'data-spent-usd': b.spent_usd, 'data-spent-tokens': b.spent_tokens },
      h('td', {}, subjectLabel(b.subject, names)), h('td', {}, b.period),
      capCell(b.spent_usd, b.max_usd, usd), capCell(b.spent_tokens, b.max_tokens, num),
      h('td', { class: 'num' }, b.max_tokens_per_minute != null ? num(b.max_tokens_per_minute) : '—'),
      h('td', { class: 'num' }, b.reserved_usd || b.reserved_tokens ? `${usd(b.reserved_usd)}, ${num(b.reserved_tokens)} tokens` : '—'),
      h('td', {}, b.resets_at ? when(b.resets_at) : 'never'),
      actions ? h('td', {}, actions(b)) : null)),
    'No budgets yet.');
}

// allBudgets is the usage page's every budget, for an admin.
export async function allBudgets(names) {
  const bs = (await gw('GET', '/budgets')).data;
  return h('section', { class: 'card', id: 'usage-all-budgets' },
    h('div', { class: 'row' }, h('h2', {}, 'Every budget'), h('a', { href: '#/gw/budgets', id: 'manage-budgets' }, 'Set budgets')),
    budgetTable('budgets', bs, names));
}

// --- the admin page -------------------------------------------------------

// capValue reads a cap's input: undefined when empty (on create: no cap),
// else its number (a string the API refuses stays a string, so its error
// shows).
function capValue(input) {
  const v = input.value.trim();
  if (v === '') return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : v;
}

export async function budgetsPage(me) {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const names = await subjectNames(me);
  let users = [];
  try { users = (await api('GET', '/api/users')).users; } catch { /* ids then */ }
  const list = h('div', { id: 'budget-list' });
  const err = h('div');
  let editing = null; // the budget the form edits; null: the form creates

  const type = h('select', { id: 'budget-subject-type' }, subjectTypes.map(([v, label]) => h('option', { value: v }, label)));
  const user = h('input', { id: 'budget-user', list: 'budget-users', placeholder: 'a user id', autocomplete: 'off' });
  const userList = h('datalist', { id: 'budget-users' }, users.map((u) => h('option', { value: u.id }, u.email)));
  const agent = h('select', { id: 'budget-agent' }, Array.from(names.agents.values(), (a) =>
    h('option', { value: a.id }, `${a.agent_key} (${a.owner_id ? (users.find((u) => u.id === a.owner_id)?.email || a.owner_id) : 'no owner'})`)));
  const key = h('select', { id: 'budget-key' }, Array.from(names.keys.values()).filter((k) => !k.revoked).map((k) =>
    h('option', { value: k.id }, `${k.name} (${k.prefix}…)`)));
  const subjectFields = {
    user: h('label', { class: 'subject-field' }, 'User', user, userList),
    agent: h('label', { class: 'subject-field' }, 'Agent', agent),
    api_key: h('label', { class: 'subject-field' }, 'Gateway API key', key),
  };
  const showSubject = () => {
    for (const [t, el] of Object.entries(subjectFields)) el.hidden = t !== type.value;
  };
  type.addEventListener('change', showSubject);
  const period = h('select', { id: 'budget-period' }, ['day', 'month', 'total'].map((p) => h('option', { value: p }, p === 'total' ? 'total (never resets)' : `${p} (UTC)`)));
  const maxUSD = h('input', { id: 'budget-max-usd', type: 'number', min: 0, step: 'any', inputmode: 'decimal', placeholder: 'no cap' });
  const maxTokens = h('input', { id: 'budget-max-tokens', type: 'number', min: 0, step: 1, placeholder: 'no cap' });
  const maxTPM = h('input', { id: 'budget-max-tpm', type: 'number', min: 0, step: 1, placeholder: 'no cap' });
  const heading = h('h3', { id: 'budget-form-title' });
  const submit = h('button', { type: 'submit', id: 'budget-submit' });
  const cancel = h('button', { type: 'button', class: 'secondary', id: 'budget-cancel', onclick: () => setMode(null) }, 'Cancel');
  const hint = h('p', { class: 'hint wide', id: 'budget-hint' });
  const saved = h('span', { class: 'copied', 'aria-live': 'polite', id: 'budget-saved' });
  const ferr = h('div', { class: 'wide', id: 'budget-error' });

  const setMode = (b) => {
    editing = b;
    for (const el of [type, user, agent, key]) el.disabled = !!b;
    if (b) {
      type.value = b.subject.type;
      if (b.subject.type === 'user') user.value = b.subject.id;
      else if (b.subject.type === 'agent') agent.value = b.subject.id;
      else key.value = b.subject.id;
      period.value = b.period;
      maxUSD.value = b.max_usd ?? '';
      maxTokens.value = b.max_tokens ?? '';
      maxTPM.value = b.max_tokens_per_minute ?? '';
      fill(heading, `Edit the ${b.period} budget of `, subjectLabel(b.subject, names));
      submit.textContent = 'Save budget';
      hint.textContent = 'Empty a token cap to remove it. A USD cap stays once set (0 allows nothing): delete the budget to drop it.';
    } else {
      maxUSD.value = maxTokens.value = maxTPM.value = '';
      heading.textContent = 'Set a budget';
      submit.textContent = 'Create budget';
      hint.textContent = 'Set at least one cap. A subject has one budget per period; a day and a month budget may both bind it.';
    }
    cancel.hidden = !b;
    showSubject();
  };

  const subjectID = () => ({ user: user.value.trim(), agent: agent.value, api_key: key.value })[type.value];
  const form = h('form', { class: 'card inline', id: 'budget-form', 'aria-labelledby': 'budget-form-title', onsubmit: onSubmit(ferr, async () => {
    saved.textContent = '';
    const body = { period: period.value };
    const usdCap = capValue(maxUSD);
    if (usdCap !== undefined) body.max_usd = usdCap;
    for (const [f, input] of [['max_tokens', maxTokens], ['max_tokens_per_minute', maxTPM]]) {
      const v = capValue(input);
      // On edit, an emptied token cap is 0: no cap (the API keeps absent fields).
      if (v !== undefined) body[f] = v;
      else if (editing && editing[f] != null) body[f] = 0;
    }
    if (editing) {
      await gw('PUT', '/budgets/' + editing.id, body);
      saved.textContent = 'Saved.';
    } else {
      await gw('POST', '/budgets', { subject: { type: type.value, id: subjectID() }, ...body });
      saved.textContent = 'Created.';
    }
    setMode(null);
    await refresh();
  }) }, heading,
  h('label', {}, 'Subject', type), Object.values(subjectFields),
  h('label', {}, 'Period', period), h('label', {}, 'Max USD', maxUSD), h('label', {}, 'Max tokens', maxTokens),
  h('label', {}, 'Max tokens per minute', maxTPM),
  h('div', { class: 'actions' }, saved, cancel, submit), hint, ferr);

  const refresh = () => guarded(err, async () => {
    const bs = (await gw('GET', '/budgets')).data;
    fill(list, budgetTable('budgets', bs, names, (b) => h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'secondary budget-edit', onclick: () => { setMode(b); form.scrollIntoView(); period.focus(); } }, 'Edit'),
      h('button', { type: 'button', class: 'danger budget-delete', onclick: () => guarded(err, async () => {
        if (!await confirmDialog('Delete this budget?', 'Its spend is forgotten and it stops binding at once.', 'Delete')) return;
        await gw('DELETE', '/budgets/' + b.id);
        if (editing && editing.id === b.id) setMode(null);
        await refresh();
      }) }, 'Delete'))));
  });

  setMode(null);
  // A link from an agent's or an API key's page names the subject.
  const t = params.get('type');
  if (t && subjectFields[t]) {
    type.value = t;
    if (t === 'user') user.value = params.get('id') || '';
    else if (t === 'agent') agent.value = params.get('id') || '';
    else key.value = params.get('id') || '';
    showSubject();
  }
  adminPage('budgets', 'Budgets', h('p', { class: 'muted' }, 'Caps on what a user, an agent or a gateway API key may spend, ',
    'enforced before each call: every budget that binds a call (its key’s, its user’s, its agent’s) must fit its worst case.'),
  form, err, list);
  await refresh();
}
