// gatehouse console, an agent's provider settings: its fallbacks (the
// providers and models the same turn goes to, in order, when the
// primary's call fails with a retryable error after its retries or the
// provider is cooling down) and other_config.max_tokens (the bound of
// one answer; empty: the provider's setting or default). The agent's
// owner edits them on the agent's page (gw.js); anyone else who sees the
// agent sees them among its facts.

import { h, fill, onSubmit } from './app.js';
import { gw } from './gwlib.js';

// maxFallbacks is how many fallbacks an agent names at most.
const maxFallbacks = 8;

// providerName names the provider of a fallback (or the agent's own
// provider_id) from the providers list, else by what the agent says.
export function providerName(providers, id, fallback) {
  const p = providers.find((x) => x.id === id);
  return p ? (p.display_name || p.name) : (fallback || id || '—');
}

// fallbackSummary is the read-only line: "claude / claude-sonnet-4-5 → …".
export function fallbackSummary(a, providers) {
  const fbs = a.fallbacks || [];
  if (fbs.length === 0) return 'none';
  return fbs.map((f) => `${providerName(providers, f.provider_id, f.provider)} / ${f.model}`).join(' → ');
}

// fallbackEditor is the owner's form: ordered rows of provider and model
// (add, move up, remove) and max tokens; onSaved gets the updated agent.
export function fallbackEditor(a, providers, onSaved) {
  const rows = h('ol', { class: 'fallbacks', id: 'fallback-rows' });
  const add = h('button', { type: 'button', class: 'secondary', id: 'fallback-add', onclick: () => addRow().focus() }, 'Add a fallback');
  // The gateway takes at most maxFallbacks.
  const renumber = () => { add.disabled = rows.children.length >= maxFallbacks; renumberRows(); };
  const renumberRows = () => [...rows.children].forEach((li, i) => {
    li.querySelector('select').setAttribute('aria-label', `fallback ${i + 1}: provider`);
    li.querySelector('input').setAttribute('aria-label', `fallback ${i + 1}: model`);
    li.querySelector('.fallback-up').setAttribute('aria-label', `move fallback ${i + 1} up`);
    li.querySelector('.fallback-up').disabled = i === 0;
    li.querySelector('.fallback-remove').setAttribute('aria-label', `remove fallback ${i + 1}`);
  });
  const addRow = (fb) => {
    const sel = h('select', { class: 'fallback-provider' }, providers.map((p) => h('option', {
      value: p.name, selected: fb && (p.id === fb.provider_id || p.name === fb.provider) }, p.display_name || p.name)));
    const model = h('input', { class: 'fallback-model', required: true, value: fb ? fb.model : '', placeholder: 'e.g. claude-sonnet-4-5' });
    const li = h('li', { class: 'fallback-row' },
      h('label', {}, 'Provider', sel), h('label', { class: 'grow' }, 'Model', model),
      h('button', { type: 'button', class: 'secondary fallback-up', onclick: () => {
        if (li.previousElementSibling) rows.insertBefore(li, li.previousElementSibling);
        renumber();
      } }, '↑ Up'),
      h('button', { type: 'button', class: 'secondary fallback-remove', onclick: () => { li.remove(); renumber(); } }, 'Remove'));
    rows.append(li);
    renumber();
    return model;
  };
  (a.fallbacks || []).forEach(addRow);
  const oc = a.other_config || {};
  const maxTokens = h('input', { id: 'agent-max-tokens', type: 'number', min: 1, max: 1000000, step: 1, value: oc.max_tokens || '',
    placeholder: 'the provider’s' });
  const saved = h('span', { class: 'copied', 'aria-live': 'polite', id: 'fallbacks-saved' });
  const err = h('div');
  const form = h('form', { class: 'card', id: 'edit-agent-fallbacks', onsubmit: onSubmit(err, async () => {
    saved.textContent = '';
    const fallbacks = [...rows.children].map((li) => ({
      provider: li.querySelector('select').value, model: li.querySelector('input').value.trim() }));
    const other = { ...oc };
    if (maxTokens.value === '') delete other.max_tokens;
    else other.max_tokens = Number(maxTokens.value);
    const updated = await gw('PUT', '/agents/' + a.id, { fallbacks, other_config: other });
    onSaved(updated);
    fill(rows);
    (updated.fallbacks || []).forEach(addRow);
    saved.textContent = 'Saved.';
  }) }, h('h2', {}, 'Fallbacks and limits'),
  h('p', { class: 'muted' }, 'When the agent’s provider fails with a retryable error after its retries, or is cooling down, the same turn goes to the first fallback, then the next. The trace shows each attempt.'),
  rows, h('p', { class: 'empty fallbacks-none' }, 'No fallbacks: a failed call fails the turn.'),
  h('div', { class: 'actions start' }, add),
  h('label', {}, 'Max tokens per answer', maxTokens),
  h('div', { class: 'actions' }, saved, h('button', { type: 'submit' }, 'Save')), err);
  return form;
}
