// gatehouse console, the gateway's observability pages: traces (a
// trace's spans drawn as a time line, with each call's cost) and usage
// (the budgets that bind the user, uPlot charts of tokens and cost by
// day).

import { h, fill, when, guarded, page, every, onLeave } from './app.js';
import { gw, q, isAdmin, num, ms, usd, costText, person, agentNames, table, badge } from './gwlib.js';
import { myBudgets, allBudgets, subjectNames } from './gwbudgets.js';

// --- traces ---------------------------------------------------------------

export async function tracesPage(me) {
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
    list.replaceChildren(table('traces', ['Run', 'Agent', 'User', 'Model', 'Status', 'Tokens in/out', 'Cost', 'Spans', 'Duration', 'Started'],
      r.data.map((t) => h('tr', { 'data-trace-id': t.id },
        h('td', {}, h('a', { href: '#/traces/' + encodeURIComponent(t.id), class: 'trace-link' }, t.name)),
        h('td', {}, names.get(t.agent_id) || h('code', {}, t.agent_id)),
        h('td', {}, person(t.user_id)),
        h('td', {}, t.model || '—'), h('td', {}, badge(t.status, t.status === 'ok')),
        h('td', { class: 'num' }, `${num(t.tokens.input)} / ${num(t.tokens.output)}`),
        h('td', { class: 'num trace-cost' }, costText(t)),
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
  if (s.span_type === 'llm') {
    label += ` · ${num(s.tokens.input)} in / ${num(s.tokens.output)} out`;
    if (s.price_known === false) label += ' · unpriced';
    else if (s.price_known != null) label += ` · ${usd(s.cost_usd)}`;
  }
  if (s.attempt > 1) label += ` · attempt ${s.attempt}`;
  return label;
}

// tokenKinds reads the token counts beside in and out that a provider
// reports (prompt-cache reads and writes, reasoning) from a span or a
// trace (tokens.cache_read, …) or a usage point (cache_read_tokens, …):
// 0 where it reports none.
function tokenKinds(x) {
  const t = x.tokens || {};
  const pick = (k) => Number(t[k] ?? x[k + '_tokens'] ?? 0);
  return { cacheRead: pick('cache_read'), cacheWrite: pick('cache_write'), reasoning: pick('reasoning') };
}

// callText describes an LLM span's provider call: which provider and
// model answered (its type), the attempt (a retry or a fallback is
// attempt 2 and on), and the cache and reasoning tokens where present.
function callText(s) {
  if (s.span_type !== 'llm') return '—';
  const parts = [];
  const who = [s.provider, s.model].filter(Boolean).join(' / ');
  if (who) parts.push(s.provider_type ? `${who} (${s.provider_type})` : who);
  else if (s.provider_type) parts.push(s.provider_type);
  if (s.attempt) parts.push(`attempt ${s.attempt}`);
  const k = tokenKinds(s);
  if (k.cacheRead || k.cacheWrite) parts.push(`cache ${num(k.cacheRead)} read / ${num(k.cacheWrite)} written`);
  if (k.reasoning) parts.push(`${num(k.reasoning)} reasoning`);
  return parts.join(' · ') || '—';
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

export async function tracePage(me, id) {
  const t = await gw('GET', '/traces/' + encodeURIComponent(id));
  const names = await agentNames();
  const rows = spanRows(t.spans || []);
  page(`Trace ${t.name}`, h('p', {}, h('a', { href: '#/traces' }, '← all traces')),
    h('section', { class: 'card' }, h('dl', { class: 'facts' },
      h('dt', {}, 'Run'), h('dd', {}, h('code', { id: 'trace-id' }, t.id)),
      h('dt', {}, 'Agent'), h('dd', {}, names.get(t.agent_id) || h('code', {}, t.agent_id)),
      h('dt', {}, 'User'), h('dd', {}, person(t.user_id)),
      h('dt', {}, 'Status'), h('dd', {}, badge(t.status, t.status === 'ok'), t.error ? ' ' + t.error : ''),
      h('dt', {}, 'Model'), h('dd', { id: 'trace-model' }, `${t.provider || '—'} / ${t.model || '—'}`, t.provider_type ? h('span', { class: 'muted' }, ` (${t.provider_type})`) : null),
      h('dt', {}, 'Tokens'), h('dd', { id: 'trace-tokens' }, `${num(t.tokens.input)} in, ${num(t.tokens.output)} out`, tokenExtras(tokenKinds(t))),
      h('dt', {}, 'Cost'), h('dd', { id: 'trace-cost', 'data-cost-usd': t.cost_usd }, costText(t),
        t.price_known === false ? h('span', { class: 'muted' }, ' (a call’s model has no price: it counts $0)') : null),
      h('dt', {}, 'Duration'), h('dd', {}, ms(t.duration_ms)),
      h('dt', {}, 'Started'), h('dd', {}, when(t.start_time)),
      t.input_preview ? [h('dt', {}, 'Input'), h('dd', {}, t.input_preview)] : null,
      t.output_preview ? [h('dt', {}, 'Output'), h('dd', {}, t.output_preview)] : null)),
    h('section', { class: 'card' }, h('h2', {}, `Spans (${rows.length})`), rows.length ? timeline(t) : h('p', { class: 'empty' }, 'No spans.'),
      table('spans', ['Span', 'Type', 'Call', 'Duration', 'Tokens in/out', 'Cost', 'Status'], rows.map(({ s, depth }) => h('tr', { 'data-span-type': s.span_type },
        h('td', { class: 'depth-' + Math.min(depth, 4) }, s.name), h('td', {}, s.span_type),
        h('td', { class: 'span-call' }, callText(s)),
        h('td', { class: 'num' }, ms(s.duration_ms)),
        h('td', { class: 'num' }, s.span_type === 'llm' ? `${num(s.tokens.input)} / ${num(s.tokens.output)}` : '—'),
        h('td', { class: 'num span-cost' }, s.span_type === 'llm' ? costText(s) : '—'),
        h('td', {}, badge(s.status, s.status === 'ok'), s.error ? ' ' + s.error : ''))), 'No spans.')));
}

// tokenExtras is " (120 read from the prompt cache, …)" for the kinds a
// provider reported, "" when none.
function tokenExtras(k) {
  const parts = [];
  if (k.cacheRead) parts.push(`${num(k.cacheRead)} read from the prompt cache`);
  if (k.cacheWrite) parts.push(`${num(k.cacheWrite)} written to it`);
  if (k.reasoning) parts.push(`${num(k.reasoning)} of reasoning`);
  return parts.length ? ` (${parts.join(', ')})` : '';
}

// --- usage ----------------------------------------------------------------

const palette = ['#2563eb', '#c62828', '#2e7d32', '#b26a00', '#7b1fa2', '#00838f', '#5d4037', '#455a64'];

// seriesChart draws one uPlot chart of several series over days; floor
// is the least top of its y axis, money formats it in dollars.
function seriesChart(box, days, series, yLabel, { floor = 5, money = false } = {}) {
  box.replaceChildren();
  const xs = days.map((d) => Date.parse(d) / 1000);
  return new uPlot({
    width: Math.max(320, box.clientWidth || 640), height: 240,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    scales: { x: { time: true, range: (_u, lo, hi) => [lo - 43200, hi + 43200] }, y: { range: (_u, _lo, hi) => [0, Math.max(floor, hi * 1.1)] } },
    axes: [{ incrs: [86400, 2 * 86400, 7 * 86400], values: (_u, ticks) => ticks.map((t) => new Date(t * 1000).toISOString().slice(5, 10)) },
      { label: yLabel, ...(money ? { size: 80, values: (_u, ticks) => ticks.map((t) => usd(t)) } : {}) }],
    series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: palette[i % palette.length],
      fill: palette[i % palette.length] + '55', paths: uPlot.paths.bars({ size: [0.6 / Math.max(1, series.length), 48] }), points: { show: false } }))],
  }, [xs, ...series.map((s) => s.values)], box);
}

// pivot turns usage points into days and a series per group of field
// (e.g. cost_usd per agent), labelled by label.
function pivot(points, field, label) {
  const days = [...new Set(points.map((p) => p.bucket))].sort();
  const keys = [...new Set(points.map((p) => p.group))];
  const at = new Map(points.map((p) => [p.bucket + '|' + p.group, p]));
  return { days, keys, at, series: keys.map((g) => ({ label: label(g), values: days.map((d) => (at.get(d + '|' + g) || {})[field] || 0) })) };
}

// unpricedNote flags the calls to models without a price (they count $0,
// which is not free): how many, and which models, from the by-model
// usage. null when every call was priced.
function unpricedNote(byModel) {
  const per = new Map();
  for (const p of byModel) if (p.unpriced_calls) per.set(p.group || '—', (per.get(p.group || '—') || 0) + p.unpriced_calls);
  if (per.size === 0) return null;
  const total = [...per.values()].reduce((a, b) => a + b, 0);
  return h('p', { class: 'warning', id: 'usage-unpriced', role: 'status', 'data-unpriced': total },
    `${num(total)} call${total === 1 ? '' : 's'} to models without a price counted as $0: `,
    [...per].map(([m, n], i) => [i ? ', ' : '', h('code', {}, m), ` (${num(n)})`]),
    '. Give them a price in the config’s pricing.models or the provider’s settings.prices.');
}

// costTable lists cost per day and group (an agent, a model).
function costTable(id, points, what, label) {
  return table(id, ['Day (UTC)', what, 'Runs', 'Cost', 'Unpriced calls'], points.map((p) => h('tr', { 'data-group': p.group || '' },
    h('td', {}, p.bucket.slice(0, 10)), h('td', {}, label(p.group)), h('td', { class: 'num' }, num(p.runs)),
    h('td', { class: 'num' }, usd(p.cost_usd)),
    h('td', { class: 'num' }, p.unpriced_calls ? badge(num(p.unpriced_calls) + ' unpriced', false) : '—'))), 'No runs in this period.');
}

export async function usagePage(me) {
  const names = await subjectNames(me);
  const admin = isAdmin(me);
  const groups = admin ? ['agent', 'user', 'model', 'provider', 'api_key'] : ['agent', 'model'];
  const groupBy = h('select', { id: 'usage-group', 'aria-label': 'group by' }, groups.map((g) => h('option', { value: g }, 'by ' + g.replace('_', ' '))));
  const range = h('select', { id: 'usage-range' }, [7, 30, 90].map((d) => h('option', { value: d, selected: d === 30 }, `last ${d} days`)));
  const budgets = h('div', { id: 'usage-budget-box' });
  const totals = h('div', { class: 'grid', id: 'usage-totals' });
  const byGroup = h('div', { class: 'chart', id: 'usage-by-group' });
  const inOut = h('div', { class: 'chart', id: 'usage-in-out' });
  const costAgent = h('div', { class: 'chart', id: 'usage-cost-agent' });
  const costModel = h('div', { class: 'chart', id: 'usage-cost-model' });
  const unpriced = h('div');
  const costTables = h('div');
  const tableBox = h('div');
  const err = h('div');
  let plots = [];
  onLeave(() => plots.forEach((p) => p.destroy()));
  const agentLabel = (g) => names.agents.get(g)?.agent_key || g || '—';
  const keyLabel = (g) => names.keys.get(g)?.name || g || '—';
  const label = (g) => (groupBy.value === 'agent' ? agentLabel(g) : groupBy.value === 'api_key' ? keyLabel(g) : groupBy.value === 'user' ? person(g) : g || '—');
  // Read both, then swap: the 15 s refresh does not blank the bars.
  const budgetErr = h('div');
  const loadBudgets = () => guarded(budgetErr, async () => {
    const [mine, all] = await Promise.all([myBudgets(me, names), admin ? allBudgets(names) : null]);
    fill(budgets, mine, all);
  });
  const load = () => guarded(err, async () => {
    const from = new Date(Date.now() - Number(range.value) * 86400000);
    from.setUTCHours(0, 0, 0, 0);
    const series = (by) => gw('GET', '/usage' + q({ granularity: 'day', group_by: by, from: from.toISOString().replace(/\.\d+Z$/, 'Z') }));
    const [grouped, summary, byAgent, byModel] = await Promise.all([
      series(groupBy.value), gw('GET', '/usage/summary' + q({ period: '30d' })), series('agent'), series('model')]);
    const c = summary.current;
    fill(totals, [['Runs (30 days)', num(c.requests), 'usage-runs'], ['Cost (30 days)', usd(c.cost_usd), 'usage-cost'],
      ['Tokens in', num(c.input_tokens), 'usage-in'], ['Tokens out', num(c.output_tokens), 'usage-out'],
      ['Tool calls', num(c.tool_calls), 'usage-tools'], ['Errors', num(c.errors), 'usage-errors'],
      // The prompt cache and reasoning, where a provider reported any; unpriced calls, flagged.
      ...(c.cache_read_tokens ? [['From the prompt cache', num(c.cache_read_tokens), 'usage-cache-read']] : []),
      ...(c.reasoning_tokens ? [['Reasoning', num(c.reasoning_tokens), 'usage-reasoning']] : []),
      ...(c.unpriced_calls ? [['Unpriced calls (counted as $0)', num(c.unpriced_calls), 'usage-unpriced-calls']] : [])]
      .map(([text, v, id]) => h('section', { class: 'card stat' + (id === 'usage-unpriced-calls' ? ' warn' : '') },
        h('div', { class: 'muted' }, text), h('strong', { id, 'data-value': id === 'usage-cost' ? c.cost_usd : null }, v))));
    const tokensBy = pivot(grouped.data, 'total_tokens', (g) => {
      const l = label(g);
      return typeof l === 'string' ? l : l.textContent; // a chart's legend is text
    });
    const sum = (d, f) => tokensBy.keys.reduce((s, g) => s + ((tokensBy.at.get(d + '|' + g) || {})[f] || 0), 0);
    byGroup.dataset.total = String(grouped.data.reduce((s, p) => s + p.total_tokens, 0));
    costAgent.dataset.total = String(byAgent.data.reduce((s, p) => s + p.cost_usd, 0));
    costModel.dataset.total = String(byModel.data.reduce((s, p) => s + p.cost_usd, 0));
    plots.forEach((p) => p.destroy());
    plots = [];
    const empty = () => h('p', { class: 'empty' }, 'No runs in this period.');
    if (tokensBy.days.length === 0) {
      for (const box of [byGroup, costAgent, costModel]) box.replaceChildren(empty());
      inOut.replaceChildren();
    } else {
      const days = tokensBy.days;
      plots.push(seriesChart(byGroup, days, tokensBy.series, 'tokens'));
      plots.push(seriesChart(inOut, days, [{ label: 'tokens in', values: days.map((d) => sum(d, 'input_tokens')) },
        { label: 'tokens out', values: days.map((d) => sum(d, 'output_tokens')) }], 'tokens'));
      const ca = pivot(byAgent.data, 'cost_usd', agentLabel);
      const cm = pivot(byModel.data, 'cost_usd', (g) => g || '—');
      plots.push(seriesChart(costAgent, ca.days, ca.series, 'USD', { floor: 0.01, money: true }));
      plots.push(seriesChart(costModel, cm.days, cm.series, 'USD', { floor: 0.01, money: true }));
    }
    fill(unpriced, unpricedNote(byModel.data));
    fill(costTables, h('h3', {}, 'By agent'), costTable('usage-cost-agents', byAgent.data, 'agent', agentLabel),
      h('h3', {}, 'By model'), costTable('usage-cost-models', byModel.data, 'model', (g) => g || '—'));
    // Cache and reasoning columns show when a provider reported any.
    const kinds = grouped.data.map(tokenKinds);
    const extra = kinds.some((k) => k.cacheRead || k.cacheWrite || k.reasoning);
    tableBox.replaceChildren(table('usage', ['Day (UTC)', groupBy.value.replace('_', ' '), 'Runs', 'In', 'Out',
      ...(extra ? ['Cache read', 'Cache write', 'Reasoning'] : []), 'Tool calls', 'Cost'],
    grouped.data.map((p, i) => h('tr', {}, h('td', {}, p.bucket.slice(0, 10)), h('td', {}, label(p.group)),
      h('td', { class: 'num' }, num(p.runs)), h('td', { class: 'num' }, num(p.input_tokens)),
      h('td', { class: 'num' }, num(p.output_tokens)),
      extra ? [kinds[i].cacheRead, kinds[i].cacheWrite, kinds[i].reasoning].map((v) => h('td', { class: 'num' }, num(v))) : null,
      h('td', { class: 'num' }, num(p.tool_calls)),
      h('td', { class: 'num' }, usd(p.cost_usd), p.unpriced_calls ? [' ', badge('unpriced', false)] : null))), 'No runs in this period.'));
  });
  groupBy.addEventListener('change', load);
  range.addEventListener('change', load);
  page(admin ? 'Usage (every user)' : 'My usage', budgetErr, budgets, totals, err,
    h('div', { class: 'actions start usage-controls' }, h('label', { class: 'inline-check' }, 'The charts and tables below cover the', range)),
    h('section', { class: 'card', id: 'usage-cost-card' }, h('div', { class: 'row' }, h('h2', {}, 'Cost per day'), h('span', { class: 'muted' }, 'USD, at the models’ prices')),
      unpriced,
      h('div', { class: 'grid' }, h('div', {}, h('h3', {}, 'By agent'), costAgent), h('div', {}, h('h3', {}, 'By model'), costModel)),
      h('details', {}, h('summary', {}, 'As a table'), costTables)),
    h('section', { class: 'card' }, h('div', { class: 'row' }, h('h2', {}, 'Tokens per day'), groupBy), byGroup),
    h('section', { class: 'card' }, h('h2', {}, 'Tokens in and out per day'), inOut,
      h('details', {}, h('summary', {}, 'As a table'), tableBox)));
  await Promise.all([loadBudgets(), load()]);
  every(15000, () => { loadBudgets(); load(); });
}
