// gatehouse console, the gateway admin's providers pages: the list, with
// a create form whose fields follow the provider type, and a provider's
// own page: each key's state (masked), the last error, the models its
// API lists, a verify button, and an edit form. Keys are typed into
// password inputs and sent once; the gateway answers with masked hints
// only ("****abcd"), which is all this page ever shows.

import { h, fill, when, guarded, onSubmit, confirmDialog, go } from './app.js';
import { gw, ms, table, badge, adminPage } from './gwlib.js';

// A provider type's form: its default api_base (host and path only: the
// console's scripts name no address), whether api_base is required,
// whether it takes a key, and its settings fields.
const T = (type, label, o = {}) => ({ type, label, base: '', key: true, fields: ['max_tokens'], retries: true, ...o });

// providerTypes lists every provider_type the gateway accepts, in the
// type select's order.
export const providerTypes = [
  T('anthropic_native', 'Anthropic (native)', { base: 'api.anthropic.com', fields: ['thinking', 'caching', 'max_tokens'] }),
  T('gemini_native', 'Google Gemini (native)', { base: 'generativelanguage.googleapis.com', fields: ['thinking', 'max_tokens'] }),
  T('azure_openai', 'Azure OpenAI', { baseRequired: 'your resource’s endpoint, e.g. my-resource.openai.azure.com',
    fields: ['api_version', 'deployments', 'max_tokens'] }),
  T('bedrock', 'Amazon Bedrock', { base: 'bedrock-runtime.<region>.amazonaws.com', fields: ['region', 'thinking', 'max_tokens'],
    keyLabel: 'AWS credentials', keyHint: 'ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]' }),
  T('ollama', 'Ollama', { base: '127.0.0.1:11434', keyHint: 'optional: only behind a proxy that asks for one', fields: ['max_tokens', 'num_ctx'] }),
  T('openai_compat', 'OpenAI-compatible endpoint', { baseRequired: 'its OpenAI-compatible /v1 base URL' }),
  T('openai', 'OpenAI (openai_compat preset)', { base: 'api.openai.com/v1' }),
  T('openrouter', 'OpenRouter (openai_compat preset)', { base: 'openrouter.ai/api/v1' }),
  T('groq', 'Groq (openai_compat preset)', { base: 'api.groq.com/openai/v1' }),
  T('deepseek', 'DeepSeek (openai_compat preset)', { base: 'api.deepseek.com/v1' }),
  T('mistral', 'Mistral (openai_compat preset)', { base: 'api.mistral.ai/v1' }),
  T('xai', 'xAI (openai_compat preset)', { base: 'api.x.ai/v1' }),
  T('echo', 'echo (offline, for demos)', { key: false, noBase: true, fields: [], retries: false }),
];
const aliases = { anthropic: 'anthropic_native', gemini: 'gemini_native' };

// typeInfo describes a provider_type, aliases resolved; an unknown type
// (a newer server's) gets the generic form.
export function typeInfo(name) {
  const n = aliases[name] || name;
  return providerTypes.find((t) => t.type === n) || T(n, n);
}

// keyHints are a provider's keys as the gateway shows them, in the order
// calls take them: the masked api_key, then the masked pool (api_keys).
export function keyHints(p) {
  return [p.api_key, ...(p.api_keys || [])].filter(Boolean);
}

// typeFields builds the settings inputs of type info, filled from
// settings s (editing: a stored provider's, else a new one's defaults);
// settings() reads them back over s (keeping what the form does not
// show), or throws on a malformed deployments line.
function typeFields(info, s = {}, editing = false) {
  const nodes = [];
  const readers = [];
  const number = (id, label, key, attrs) => {
    const el = h('input', { id, type: 'number', step: 1, value: s[key] ?? '', ...attrs });
    nodes.push(h('label', {}, label, el));
    readers.push((out) => {
      if (el.value === '') delete out[key];
      else out[key] = Number(el.value);
    });
  };
  for (const f of info.fields) {
    if (f === 'region') {
      const el = h('input', { id: 'provider-region', value: s.region ?? (editing ? '' : 'us-east-1'), placeholder: 'us-east-1',
        'aria-describedby': 'provider-region-hint' });
      nodes.push(h('label', {}, 'AWS region', el, h('span', { class: 'hint', id: 'provider-region-hint' }, 'required unless api_base is set')));
      readers.push((out) => { if (el.value.trim()) out.region = el.value.trim(); else delete out.region; });
    } else if (f === 'api_version') {
      const el = h('input', { id: 'provider-api-version', value: s.api_version || '2024-10-21', list: 'azure-api-versions', required: true });
      nodes.push(h('label', {}, 'API version', el,
        h('datalist', { id: 'azure-api-versions' }, ['2024-10-21', 'v1'].map((v) => h('option', { value: v })))));
      readers.push((out) => { out.api_version = el.value.trim(); });
    } else if (f === 'deployments') {
      const lines = Object.entries(s.deployments || {}).map(([m, d]) => `${m}=${d}`).join('\n');
      const el = h('textarea', { id: 'provider-deployments', rows: 3, value: lines, spellcheck: 'false',
        placeholder: 'gpt-4o=my-gpt-4o-deployment', 'aria-describedby': 'provider-deployments-hint' });
      nodes.push(h('label', { class: 'wide' }, 'Deployments', el,
        h('span', { class: 'hint', id: 'provider-deployments-hint' }, 'one model=deployment per line; a model not listed is its own deployment name')));
      readers.push((out) => { out.deployments = parseDeployments(el.value); });
    } else if (f === 'thinking') {
      // Anthropic's minimum is 1024; Gemini takes -1 (dynamic) and 0 (off).
      const gem = info.type === 'gemini_native';
      number('provider-thinking', 'Thinking budget (tokens)', 'thinking_budget_tokens', { min: gem ? -1 : (info.type === 'anthropic_native' ? 1024 : 1),
        placeholder: gem ? 'the model’s; -1 dynamic, 0 off' : 'off' });
    } else if (f === 'caching') {
      const el = h('input', { id: 'provider-caching', type: 'checkbox', checked: s.prompt_caching !== false });
      nodes.push(h('label', { class: 'check' }, el, ' Prompt caching'));
      readers.push((out) => { out.prompt_caching = el.checked; });
    } else if (f === 'max_tokens') {
      number('provider-max-tokens', 'Max tokens', 'max_tokens', { min: 1, placeholder: info.type === 'anthropic_native' ? '4096' : 'the model’s' });
    } else if (f === 'num_ctx') {
      number('provider-num-ctx', 'Context window (num_ctx)', 'num_ctx', { min: 1, placeholder: 'the model’s' });
    }
  }
  if (info.retries) number('provider-max-retries', 'Max retries', 'max_retries', { min: 0, max: 10, placeholder: '2' });
  return { nodes, settings: () => { const out = { ...s }; readers.forEach((r) => r(out)); return out; } };
}

// parseDeployments reads "model=deployment" lines into an object.
function parseDeployments(text) {
  const out = {};
  text.split('\n').forEach((line, i) => {
    const l = line.trim();
    if (!l) return;
    const eq = l.indexOf('=');
    if (eq < 1 || eq === l.length - 1) throw new Error(`deployments, line ${i + 1}: want model=deployment`);
    out[l.slice(0, eq).trim()] = l.slice(eq + 1).trim();
  });
  return out;
}

// maxKeys is how many keys a provider holds at most (its key and its pool).
const maxKeys = 16;

// keyInputs is the key part of a form (editing: of the edit form): one
// password input and "more keys", a list of password inputs grown by a
// button (or by pasting several keys, one a line, into any of them: a
// password input would run them together); values() returns {key, more}
// with the empty ones left out.
function keyInputs(info, editing) {
  const key = h('input', { id: 'provider-key', type: 'password', autocomplete: 'off',
    placeholder: info.keyHint || (editing ? 'unchanged when empty' : '') });
  const list = h('div', { class: 'more-keys', id: 'provider-more-keys' });
  const spread = (input) => input.addEventListener('paste', (e) => {
    const keys = (e.clipboardData?.getData('text') || '').split(/\r?\n/).map((k) => k.trim()).filter(Boolean);
    if (keys.length < 2) return;
    e.preventDefault();
    input.value = keys[0];
    keys.slice(1).forEach((k) => add(k));
  });
  const add = (value) => {
    const n = list.children.length + 2;
    if (n > maxKeys) return;
    const input = h('input', { type: 'password', autocomplete: 'off', class: 'provider-more-key', placeholder: info.keyHint || '', value: value || '' });
    spread(input);
    const row = h('div', { class: 'more-key' }, h('label', {}, `Key ${n}`, input),
      h('button', { type: 'button', class: 'secondary', 'aria-label': `remove key ${n}`, onclick: () => { row.remove(); renumber(); } }, 'Remove'));
    list.append(row);
    if (!value) input.focus();
  };
  spread(key);
  const renumber = () => [...list.children].forEach((row, i) => {
    row.querySelector('label').firstChild.textContent = `Key ${i + 2}`;
    row.querySelector('button').setAttribute('aria-label', `remove key ${i + 2}`);
  });
  const nodes = [
    h('label', {}, info.keyLabel || 'API key', key),
    h('fieldset', { class: 'wide keys' }, h('legend', {}, 'More keys (a pool: calls spread over them; paste several, one a line)'), list,
      h('button', { type: 'button', class: 'secondary', id: 'provider-add-key', onclick: () => add() }, 'Add a key')),
  ];
  return { nodes, values: () => ({ key: key.value, more: [...list.querySelectorAll('input')].map((i) => i.value.trim()).filter(Boolean) }) };
}

// --- the list and the create form ------------------------------------------

// providersPage lists the providers under the create form.
export async function providersPage() {
  const list = h('div', { id: 'provider-list' });
  const err = h('div');
  const refresh = async () => {
    const ps = (await gw('GET', '/providers')).data;
    list.replaceChildren(table('providers', ['Name', 'Type', 'API base', 'Keys', 'Enabled', 'Created', ''], ps.map((p) => h('tr', { 'data-provider': p.name },
      h('td', {}, h('a', { href: '#/gw/providers/' + p.id, class: 'provider-link' }, p.display_name && p.display_name !== p.name ? `${p.display_name} (${p.name})` : p.name)),
      h('td', {}, p.provider_type),
      h('td', {}, p.api_base ? h('code', {}, p.api_base) : h('span', { class: 'muted' }, typeInfo(p.provider_type).noBase ? '—' : 'default')),
      h('td', { class: 'provider-keys' }, keyHints(p).length ? keyHints(p).map((k) => h('code', { class: 'key-hint' }, k)) : '—'),
      h('td', {}, badge(p.enabled ? 'enabled' : 'disabled', p.enabled)), h('td', {}, when(p.created_at)),
      h('td', {}, h('button', { type: 'button', class: 'danger', onclick: () => guarded(err, async () => {
        if (!await confirmDialog('Delete this provider?', `“${p.name}” is removed (refused while an agent uses it).`, 'Delete')) return;
        await gw('DELETE', '/providers/' + p.id);
        await refresh();
      }) }, 'Delete')))), 'No providers yet.'));
  };
  const name = h('input', { id: 'provider-name', required: true, placeholder: 'e.g. claude' });
  const display = h('input', { id: 'provider-display-name', maxlength: 100 });
  const type = h('select', { id: 'provider-type' }, providerTypes.map((t) => h('option', { value: t.type, selected: t.type === 'openai_compat' }, t.label)));
  const base = h('input', { id: 'provider-base' });
  const baseLabel = h('label', {}, 'API base', base);
  const typed = h('div', { class: 'contents', id: 'provider-type-fields' });
  let fields;
  let keys;
  const switchType = () => {
    const info = typeInfo(type.value);
    base.required = !!info.baseRequired;
    base.placeholder = info.baseRequired || `default: ${info.base}`;
    baseLabel.hidden = !!info.noBase;
    fields = typeFields(info);
    keys = info.key ? keyInputs(info, false) : null;
    fill(typed, fields.nodes, keys ? keys.nodes : h('p', { class: 'muted wide' }, 'This type takes no key.'));
  };
  type.addEventListener('change', switchType);
  switchType();
  const cerr = h('div');
  const form = h('form', { class: 'card inline', id: 'create-provider', onsubmit: onSubmit(cerr, async () => {
    const info = typeInfo(type.value);
    const body = { name: name.value.trim(), provider_type: type.value, settings: fields.settings() };
    if (display.value.trim()) body.display_name = display.value.trim();
    if (!info.noBase && base.value.trim()) body.api_base = base.value.trim();
    if (keys) {
      const k = keys.values();
      if (k.key) body.api_key = k.key;
      if (k.more.length) body.api_keys = k.more;
    }
    await gw('POST', '/providers', body);
    name.value = ''; display.value = ''; base.value = '';
    switchType(); // empties the keys
    await refresh();
  }) }, h('h3', {}, 'Add a provider'), h('label', {}, 'Name', name), h('label', {}, 'Display name', display),
  h('label', {}, 'Type', type), baseLabel, typed, h('button', { type: 'submit' }, 'Add'), cerr);
  adminPage('providers', 'Providers', form, err, list);
  await refresh();
}

// --- one provider ------------------------------------------------------------

// keyStateRows are the rows of p's keys table: each key masked, its
// state (from key_states, which only an admin's read has) and last error.
function keyStateRows(p) {
  const states = p.key_states || keyHints(p).map((key) => ({ key }));
  return states.map((k) => {
    let state = '—';
    if (k.state === 'ready') state = badge('ready', true);
    else if (k.state === 'cooling_down') state = h('span', { class: 'status status-grace' }, k.retry_at ? `cooling down until ${when(k.retry_at)}` : 'cooling down');
    else if (k.state === 'rejected') state = badge('rejected: update the key', false);
    else if (k.state) state = k.state;
    return h('tr', { 'data-key-state': k.state || '' }, h('td', {}, h('code', { class: 'key-hint' }, k.key)),
      h('td', { class: 'key-state' }, state), h('td', {}, k.last_error || '—'));
  });
}

// providerPage is one provider: facts, keys, models, verify, edit.
export async function providerPage(me, id, saved) {
  const p = await gw('GET', '/providers/' + id);
  const info = typeInfo(p.provider_type);
  const err = h('div');
  const s = p.settings || {};
  const lastError = h('dd', { id: 'provider-last-error' });
  const facts = h('dl', { class: 'facts', id: 'provider-facts' },
    h('dt', {}, 'Name'), h('dd', {}, h('code', {}, p.name)),
    h('dt', {}, 'Type'), h('dd', {}, p.provider_type, info.label !== p.provider_type ? h('span', { class: 'muted' }, ` · ${info.label}`) : null),
    h('dt', {}, 'API base'), h('dd', {}, p.api_base ? h('code', {}, p.api_base) : (info.noBase ? '—' : `default (${info.base})`)),
    h('dt', {}, 'Enabled'), h('dd', {}, badge(p.enabled ? 'enabled' : 'disabled', p.enabled)),
    h('dt', {}, 'Settings'), h('dd', {}, Object.keys(s).length ? h('code', { id: 'provider-settings' }, JSON.stringify(s)) : 'defaults'),
    h('dt', {}, 'Last error'), lastError,
    h('dt', {}, 'Updated'), h('dd', {}, when(p.updated_at)));

  const keys = h('div', { id: 'provider-keys', 'aria-live': 'polite' });
  const keysCard = info.key || keyHints(p).length ? h('section', { class: 'card' }, h('h3', {}, 'Keys'), keys) : null;
  // health shows the keys' states and the last error of q (the provider
  // as read again after a verify or a model list, which may change them).
  const health = (q) => {
    fill(keys, table('key-states', ['Key', 'State', 'Last error'], keyStateRows(q), 'No key: calls go without one.'));
    fill(lastError, q.last_error ? `${q.last_error} (${when(q.last_error_at)})` : 'none');
  };
  health(p);
  const reread = () => gw('GET', '/providers/' + id).then(health, () => { /* the verdict says what went wrong */ });

  const models = h('div', { id: 'provider-models' });
  const merr = h('div', { id: 'provider-models-error' });
  const listModels = async () => {
    fill(models, h('p', { class: 'muted' }, 'Asking the provider…'));
    await guarded(merr, async () => {
      const r = await gw('GET', `/providers/${id}/models`);
      fill(models, table('models', ['Model', 'Name'], (r.data || []).map((m) => h('tr', { 'data-model': m.id },
        h('td', {}, h('code', {}, m.id)), h('td', {}, m.display_name || '—'))), 'The provider lists no models.'));
    });
    if (merr.childElementCount) models.replaceChildren();
    await reread();
  };
  const verdict = h('span', { id: 'provider-verify', 'aria-live': 'polite' });
  const verify = async () => {
    await guarded(verdict, async () => {
      verdict.textContent = 'Verifying…';
      const r = await gw('POST', `/providers/${id}/verify`);
      fill(verdict, r.ok ? badge('ok', true) : badge('failed', false), ` in ${ms(r.latency_ms || 0)}`, r.error ? h('span', { class: 'error' }, `: ${r.error}`) : null);
    });
    await reread();
  };
  const probe = h('section', { class: 'card' }, h('h3', {}, 'Check it'),
    h('p', { class: 'muted' }, 'Verify makes the cheapest authenticated call the provider has; Models asks its API for its model list.'),
    h('div', { class: 'actions start' },
      h('button', { type: 'button', id: 'provider-verify-btn', onclick: verify }, 'Verify'),
      h('button', { type: 'button', class: 'secondary', id: 'provider-models-btn', onclick: listModels }, 'Models'), verdict),
    merr, models);

  renderProvider(me, p, info, { facts, keysCard, probe, err, saved });
}

// renderProvider renders the provider's page with its edit form.
function renderProvider(me, p, info, { facts, keysCard, probe, err, saved }) {
  const display = h('input', { id: 'edit-provider-display-name', maxlength: 100, value: p.display_name || '' });
  const base = h('input', { id: 'edit-provider-base', value: p.api_base || '', required: !!info.baseRequired,
    placeholder: info.baseRequired || `default: ${info.base}` });
  const enabled = h('input', { id: 'edit-provider-enabled', type: 'checkbox', checked: p.enabled });
  const fields = typeFields(info, p.settings || {}, true);
  const keys = info.key || keyHints(p).length ? keyInputs(info, true) : null;
  const clear = keys ? h('input', { id: 'edit-provider-clear-pool', type: 'checkbox' }) : null;
  const done = h('span', { class: 'copied', 'aria-live': 'polite', id: 'provider-saved' }, saved ? 'Saved.' : '');
  const perr = h('div');
  const form = h('form', { class: 'card inline', id: 'edit-provider', onsubmit: onSubmit(perr, async () => {
    const body = { display_name: display.value.trim(), enabled: enabled.checked, settings: fields.settings() };
    if (!info.noBase) body.api_base = base.value.trim();
    if (keys) {
      const k = keys.values();
      if (k.key) body.api_key = k.key;
      if (k.more.length) body.api_keys = k.more;
      else if (clear.checked) body.api_keys = [];
    }
    await gw('PUT', '/providers/' + p.id, body);
    await providerPage(me, p.id, true);
  }) }, h('h3', {}, 'Edit'), h('label', {}, 'Display name', display), info.noBase ? null : h('label', {}, 'API base', base),
  h('label', { class: 'check' }, enabled, ' Enabled'), fields.nodes,
  keys ? [h('p', { class: 'muted wide' }, 'A key typed here replaces the provider’s key; keys added below replace its pool. Empty fields keep what is stored.'),
    keys.nodes, h('label', { class: 'check' }, clear, ' Remove the pool’s other keys')] : null,
  h('div', { class: 'actions wide' }, done, h('button', { type: 'submit' }, 'Save')), perr);
  const del = h('button', { type: 'button', class: 'danger', id: 'provider-delete', onclick: () => guarded(err, async () => {
    if (!await confirmDialog('Delete this provider?', `“${p.name}” is removed (refused while an agent uses it).`, 'Delete')) return;
    await gw('DELETE', '/providers/' + p.id);
    go('#/gw/providers');
  }) }, 'Delete');
  adminPage('providers', `Provider “${p.display_name || p.name}”`,
    h('p', {}, h('a', { href: '#/gw/providers' }, '← all providers')), err,
    h('div', { class: 'grid' }, h('section', { class: 'card' }, facts, h('div', { class: 'actions' }, del)), keysCard),
    probe, form);
}
