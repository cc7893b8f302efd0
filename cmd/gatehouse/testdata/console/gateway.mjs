// Drives the console's agent-gateway pages in headless Chromium, as a
// user and then an admin would, for TestConsoleGatewayInChromium
// (../../console_gateway_test.go).
//
//   node gateway.mjs <chromium> <base URL> <user email> <user password>
//                    <admin email> <admin password> <MCP server id> <screenshot dir> <a user id to share with>
//                    <the key-state stub's URL>
//
// Prints one JSON object: {shots: [{page, file, text}], facts: {...}}.
// Any failed expectation throws: the process exits non-zero with the
// reason on stderr.
import puppeteer from 'puppeteer-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const [chromium, base, userEmail, userPassword, adminEmail, adminPassword, mcpID, shotDir, shareWith, stubURL] = process.argv.slice(2);
mkdirSync(shotDir, { recursive: true });
const suffix = Math.random().toString(36).slice(2, 8);
const agentKey = `helper-${suffix}`;
const message = 'alpha beta gamma delta epsilon';
const facts = { agentKey, message };
// The Anthropic provider's key pool (never called: the test verifies the
// offline echo provider only).
const providerKeys = ['sk-ant-api03-console-test-key-aaaa1111', 'sk-ant-api03-console-test-key-bbbb2222',
  'sk-ant-api03-console-test-key-cccc3333'];
// The key-state stub's keys (keyStateStub in ../../console_gateway_test.go):
// refused, rate limited, good.
const stubKeys = ['sk-stub-console-revoked-0001', 'sk-stub-console-limited-0002', 'sk-stub-console-good-0003'];
const shots = [];

function expect(cond, what) {
  if (!cond) throw new Error('expectation failed: ' + what);
}

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const problems = [];
  globalThis.problems = problems;
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('console', (m) => {
    if (m.type() !== 'error' || /status of 401/.test(m.text())) return;
    // An answer the test provokes on purpose is no problem, once.
    if (globalThis.expectedStatus && m.text().includes('status of ' + globalThis.expectedStatus)) { globalThis.expectedStatus = 0; return; }
    problems.push('console error: ' + m.text());
  });
  page.on('requestfailed', (r) => problems.push('request failed: ' + r.url()));
  // Every answer the browser gets, to check no gateway token is among them.
  const bodies = [];
  page.on('response', async (r) => {
    try { bodies.push(await r.text()); } catch { /* a redirect or an upgrade has no body */ }
  });
  await page.evaluateOnNewDocument(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`);
    });
  });

  const ready = (route) => page.waitForFunction(
    (r) => document.getElementById('main')?.dataset.ready === r, { timeout: 15000 }, route);
  const readyPrefix = (prefix) => page.waitForFunction(
    (p) => (document.getElementById('main')?.dataset.ready || '').startsWith(p), { timeout: 15000 }, prefix);
  const visit = async (route) => {
    await page.evaluate((r) => { location.hash = '#' + r; }, route);
    await ready(route);
  };
  const shoot = async (name) => {
    const file = join(shotDir, name + '.png');
    await page.screenshot({ path: file, fullPage: true });
    const text = await page.evaluate(() => document.body.innerText);
    const junk = text.match(/\b(null|undefined|NaN)\b|\[object /);
    expect(!junk, `page ${name} shows "${junk && junk[0]}":\n${text}`);
    shots.push({ page: name, file, text });
  };
  const text = (sel) => page.$eval(sel, (el) => el.textContent.trim());
  // paste pastes lines, one a line, into the input sel.
  const paste = (sel, lines) => page.$eval(sel, (el, ls) => {
    const dt = new DataTransfer();
    dt.setData('text/plain', ls.join('\n'));
    el.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
  }, lines);
  // budgetCards reads the budget bars of the usage page: each budget's
  // subject type, period, whether it is the default, and each cap's
  // numbers (as the page's data and as it reads).
  const budgetCards = () => page.$$eval('#usage-budgets section.budget', (bs) => bs.map((b) => ({
    type: b.dataset.subjectType, period: b.dataset.period, isDefault: b.dataset.default === 'true',
    title: b.querySelector('h3').textContent, resets: b.querySelector('.budget-resets').textContent,
    caps: [...b.querySelectorAll('.budget-cap')].map((c) => ({ cap: c.dataset.cap, spent: Number(c.dataset.spent),
      reserved: Number(c.dataset.reserved), max: Number(c.dataset.max), text: c.textContent,
      bar: c.querySelector('svg.budget-bar')?.getAttribute('aria-valuetext') || '',
      filled: Number(c.querySelector('svg.budget-bar .bar-spent')?.getAttribute('width') || -1) })) })));
  const login = async (email, password) => {
    await page.goto(base + '/console/#/login', { waitUntil: 'networkidle0' });
    await ready('/login');
    await page.type('#email', email);
    await page.type('#password', password);
    await page.click('#login-form button[type=submit]');
    await ready('/keys');
  };

  // 1. A user logs in; their usage is empty.
  await login(userEmail, userPassword);
  facts.userHasGatewayAdmin = (await page.$$('#nav-gateway-admin')).length;
  await page.click('nav a[href="#/usage"]');
  await ready('/usage');
  facts.runsBefore = await text('#usage-runs');
  await page.waitForSelector('#usage-budgets');
  facts.budgetsBefore = await budgetCards();

  // 2. They create an agent and edit its prompt.
  await page.click('nav a[href="#/agents"]');
  await ready('/agents');
  facts.gatewayUser = await text('#my-gateway-user');
  await page.type('#agent-key', agentKey);
  await page.select('#agent-provider', 'echo');
  await page.type('#agent-model', 'echo-1');
  await page.type('#agent-prompt', 'You are helpful.');
  await page.click('#create-agent button[type=submit]');
  await readyPrefix('/agents/');
  facts.agentID = (await page.evaluate(() => document.getElementById('main').dataset.ready)).split('/')[2];
  await page.$eval('#edit-prompt', (el) => { el.value = ''; });
  await page.type('#edit-prompt', 'You are terse.');
  await page.click('#edit-agent-prompt button[type=submit]');
  await page.waitForFunction(() => document.getElementById('prompt-saved')?.textContent === 'Saved.');
  await page.type('#share-user', shareWith);
  await page.select('#share-role', 'operator');
  await page.click('#share-agent button[type=submit]');
  await page.waitForSelector('#share-list table.shares');
  facts.shared = await text('#share-list tbody tr');
  await shoot('agent');
  await page.click('nav a[href="#/agents"]');
  await ready('/agents');
  facts.listed = (await page.$$(`tr[data-agent-key="${agentKey}"]`)).length;
  await shoot('agents');

  // 3. They chat with it: the answer streams in, word by word.
  await page.goto(base + `/console/#/agents/${facts.agentID}`, { waitUntil: 'networkidle0' });
  await ready('/agents/' + facts.agentID);
  await page.click('#agent-chat');
  await readyPrefix(`/chat/${agentKey}/console-`);
  facts.session = await text('#chat-session');
  await page.evaluate(() => {
    window.seen = [];
    new MutationObserver(() => {
      const a = document.getElementById('chat-answer');
      if (a && a.textContent && window.seen[window.seen.length - 1] !== a.textContent) window.seen.push(a.textContent);
    }).observe(document.getElementById('chat-log'), { subtree: true, childList: true, characterData: true });
  });
  await page.type('#chat-input', message);
  await page.click('#chat-send');
  await page.waitForSelector('.msg-meta .trace-link', { timeout: 20000 });
  facts.answer = await text('#chat-answer');
  facts.streamed = await page.evaluate(() => window.seen);
  facts.meta = await text('.msg-meta');
  await page.waitForFunction(() => document.getElementById('chat-cost')?.textContent.includes('1 run'), { timeout: 10000 });
  facts.chatCost = await text('#chat-cost');
  await shoot('chat');
  // 4. The run's trace, from the answer's link: its spans on a time line, labelled.
  const openTrace = async (name) => {
    const href = await page.$$eval('.msg-meta .trace-link', (as) => as[as.length - 1].getAttribute('href'));
    for (let i = 0; i < 20; i++) { // a run is recorded just after its answer
      await page.goto(base + '/console/' + href, { waitUntil: 'networkidle0' });
      await ready(href.slice(1));
      if (await page.$('#trace-timeline g.span')) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const spans = await page.$$eval('#trace-timeline g.span', (gs) => gs.map((g) => ({ type: g.dataset.spanType, label: g.querySelector('text').textContent })));
    await shoot(name);
    return spans;
  };
  const chatURL = page.url();
  facts.spans = await openTrace('trace');
  facts.traceTokens = await text('#trace-tokens');
  facts.traceCost = await text('#trace-cost');
  facts.spanCosts = await page.$$eval('#main table.spans tbody tr[data-span-type="llm"] .span-cost', (cs) => cs.map((c) => c.textContent));
  facts.spanCall = await text('#main table.spans tbody tr[data-span-type="llm"] .span-call');

  // The session's history comes back with the page; a tool call's run
  // has an LLM call, the tool's span, and the LLM call after it.
  await page.goto(chatURL, { waitUntil: 'networkidle0' });
  await readyPrefix(`/chat/${agentKey}/console-`);
  facts.history = await page.$$eval('#chat-log .msg', (ms) => ms.map((m) => m.dataset.role + ': ' + m.querySelector('.msg-text').textContent));
  await page.type('#chat-input', '/tool memory_save {"content":"alice likes tea"}');
  await page.click('#chat-send');
  await page.waitForFunction(() => document.querySelector('#chat-answer')?.closest('.msg').querySelector('.trace-link'), { timeout: 20000 });
  facts.toolSpans = await openTrace('trace-tool');
  await page.goto(base + '/console/#/traces', { waitUntil: 'networkidle0' });
  await ready('/traces');
  facts.userTraces = await page.$$eval('#trace-list tbody tr', (rs) => rs.length);
  facts.traceListCosts = await page.$$eval('#trace-list tbody tr .trace-cost', (cs) => cs.map((c) => c.textContent));

  // 5. Usage has moved (a run is recorded just after its answer: reload until it shows).
  for (let i = 0; i < 20; i++) {
    await page.goto(base + '/console/#/usage', { waitUntil: 'networkidle0' });
    await ready('/usage');
    facts.runsAfter = await text('#usage-runs');
    if (facts.runsAfter !== '0') break;
    await new Promise((r) => setTimeout(r, 250));
  }
  facts.chartTotal = await page.$eval('#usage-by-group', (el) => el.dataset.total);
  facts.tokensIn = await text('#usage-in');
  facts.tokensOut = await text('#usage-out');
  facts.charts = (await page.$$('#usage-by-group canvas, #usage-in-out canvas')).length;
  // The budget's bar has moved (a call's settlement follows its answer: reload until it shows).
  for (let i = 0; i < 20; i++) {
    facts.budgetsAfter = await budgetCards();
    if (facts.budgetsAfter.some((b) => b.caps.some((c) => c.spent > 0))) break;
    await new Promise((r) => setTimeout(r, 250));
    await page.goto(base + '/console/#/usage', { waitUntil: 'networkidle0' });
    await ready('/usage');
  }
  facts.usageCost = await page.$eval('#usage-cost', (el) => ({ text: el.textContent, value: Number(el.dataset.value) }));
  facts.costCharts = (await page.$$('#usage-cost-agent canvas, #usage-cost-model canvas')).length;
  facts.costByAgent = await page.$eval('#usage-cost-agent', (el) => Number(el.dataset.total));
  facts.costByModel = await page.$eval('#usage-cost-model', (el) => Number(el.dataset.total));
  facts.costRows = await page.$$eval('table.usage-cost-agents tbody tr, table.usage-cost-models tbody tr', (rs) => rs.map((r) => r.textContent));
  facts.userSeesAllBudgets = (await page.$$('#usage-all-budgets')).length;
  await shoot('usage');
  await visit('/sessions');
  facts.sessionRows = (await page.$$(`tr[data-session="${facts.session}"]`)).length;
  facts.sessionCost = await text(`tr[data-session="${facts.session}"] .session-cost`);
  await shoot('sessions');

  // 6. They ask for an MCP server, on the agents page.
  await visit('/agents');
  await page.select('#mcp-request-server', mcpID);
  await page.type('#mcp-request-reason', 'the browser test needs it');
  await page.click('#mcp-request button[type=submit]');
  await page.waitForSelector('#my-mcp-requests tr[data-request-id]');
  facts.request = { id: await page.$eval('#my-mcp-requests tr[data-request-id]', (tr) => tr.dataset.requestId),
    status: await text('#my-mcp-requests .request-status') };
  await shoot('mcp-request');

  // 6b. They create a management access token for a script; it is shown once and listed.
  await visit('/tokens');
  await page.type('#token-name', 'ci');
  await page.select('#token-scope', 'write');
  await page.click('#create-token button[type=submit]');
  await page.waitForSelector('#revealed-key');
  facts.patToken = await page.$eval('#revealed-key', (el) => el.value);
  await page.waitForSelector('#token-list tr[data-token-id]');
  facts.patRow = await text('#token-list tr[data-token-id]');
  await shoot('tokens');
  await page.click('#logout');
  await ready('/login');

  // 7. An admin adds a native Anthropic provider with a key pool: the
  // create form's fields follow the type.
  await login(adminEmail, adminPassword);
  await page.click('#nav-gateway-admin');
  await ready('/gw/providers');
  // ownText is a label's own words (not its input's, options' or hint's).
  const formFields = () => page.$$eval('#create-provider label', (ls) => ls
    .filter((l) => l.offsetParent !== null)
    .map((l) => [...l.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join('').trim()));
  facts.typeFields = {};
  for (const t of ['bedrock', 'azure_openai', 'ollama', 'gemini_native', 'openai_compat', 'anthropic_native']) {
    await page.select('#provider-type', t);
    facts.typeFields[t] = { fields: await formFields(),
      baseRequired: await page.$eval('#provider-base', (el) => el.required),
      basePlaceholder: await page.$eval('#provider-base', (el) => el.placeholder),
      keyType: await page.$eval('#provider-key', (el) => el.type).catch(() => '') };
  }
  facts.typeOptions = await page.$$eval('#provider-type option', (os) => os.map((o) => o.value));
  await page.type('#provider-name', 'claude');
  await page.type('#provider-key', providerKeys[0]);
  await page.click('#provider-add-key');
  // Two more keys pasted at once, one a line, into the new input: one input each.
  await paste('#provider-more-keys input', providerKeys.slice(1));
  facts.pastedInputs = (await page.$$('#provider-more-keys input')).length;
  await page.type('#provider-thinking', '2048');
  await page.click('#create-provider button[type=submit]');
  await page.waitForSelector('tr[data-provider="claude"]');
  facts.providerKeys = await page.$$eval('tr[data-provider="claude"] .key-hint', (cs) => cs.map((c) => c.textContent));
  facts.providerRow = await text('tr[data-provider="claude"]');
  await shoot('providers');

  // Its page: each key's state, masked; an edit of its settings.
  await page.click('tr[data-provider="claude"] a.provider-link');
  await readyPrefix('/gw/providers/');
  facts.providerHeading = await text('#admin-heading');
  facts.keyStates = await page.$$eval('table.key-states tbody tr', (rs) => rs.map((r) => r.textContent));
  await page.$eval('#provider-thinking', (el) => { el.value = ''; });
  await page.type('#provider-thinking', '4096');
  await page.click('#provider-caching');
  await page.click('#edit-provider-clear-pool'); // the pool goes, api_key stays
  await page.click('#edit-provider button[type=submit]');
  await page.waitForFunction(() => document.getElementById('provider-saved')?.textContent === 'Saved.');
  facts.providerSettings = await text('#provider-settings');
  facts.keyStatesAfter = await page.$$eval('table.key-states tbody tr', (rs) => rs.map((r) => r.textContent));
  await shoot('provider');

  // A provider nothing answers for (a refused port on loopback), without
  // retries: the agent below falls back from it to echo.
  await visit('/gw/providers');
  await page.select('#provider-type', 'openai_compat');
  await page.type('#provider-name', 'dead');
  await page.type('#provider-base', 'http://127.0.0.1:9/v1');
  await page.type('#provider-max-retries', '0');
  await page.click('#create-provider button[type=submit]');
  await page.waitForSelector('tr[data-provider="dead"]');

  // A provider on a loopback stub that refuses its first key and rate
  // limits its second (all three pasted into the key field): Verify, until
  // each key shows its state.
  await page.select('#provider-type', 'openai_compat');
  await page.type('#provider-name', 'stub');
  await page.type('#provider-base', stubURL + '/v1');
  await paste('#provider-key', stubKeys);
  facts.stubInputs = (await page.$$('#provider-more-keys input')).length;
  await page.click('#create-provider button[type=submit]');
  await page.waitForSelector('tr[data-provider="stub"]');
  await page.click('tr[data-provider="stub"] a.provider-link');
  await readyPrefix('/gw/providers/');
  facts.stubVerdicts = [];
  for (let i = 0; i < 6; i++) {
    await page.click('#provider-verify-btn');
    await page.waitForFunction(() => document.querySelector('#provider-verify .status, #provider-verify .error'));
    await page.waitForNetworkIdle({ idleTime: 100 }); // the keys' states, read again
    facts.stubVerdicts.push(await text('#provider-verify'));
    const states = await page.$$eval('#provider-keys tr[data-key-state]', (rs) => rs.map((r) => r.dataset.keyState));
    if (states.includes('rejected') && states.includes('cooling_down') && facts.stubVerdicts.some((v) => v.startsWith('ok'))) break;
  }
  facts.stubStates = await page.$$eval('#provider-keys tbody tr', (rs) => rs.map((r) => r.textContent));
  facts.stubLastError = await text('#provider-last-error');
  await page.click('#provider-models-btn');
  await page.waitForFunction(() => document.querySelector('#provider-models table, #provider-models .empty, #provider-models-error .error'));
  facts.stubModels = await text('#provider-models') || await text('#provider-models-error');
  await shoot('provider-stub');
  await visit('/gw/providers');

  // The offline echo provider verifies and lists its models (no network).
  await page.click('tr[data-provider="echo"] a.provider-link');
  await readyPrefix('/gw/providers/');
  await page.click('#provider-verify-btn');
  await page.waitForFunction(() => document.querySelector('#provider-verify .status, #provider-verify .error'));
  facts.verify = await text('#provider-verify');
  await page.click('#provider-models-btn');
  await page.waitForFunction(() => document.querySelector('#provider-models table, #provider-models .empty, #provider-models-error .error'));
  facts.models = await text('#provider-models') || await text('#provider-models-error');
  await shoot('provider-echo');

  // Every admin page names itself in a heading under the tabs.
  facts.headings = [];
  for (const tab of ['providers', 'api-keys', 'budgets', 'tools', 'requests', 'channels', 'activity']) {
    await visit('/gw/' + tab);
    facts.headings.push(await page.evaluate((t) => ({ tab: t, h2: document.querySelector('#main h2')?.textContent || '',
      id: document.querySelector('#main h2')?.id || '', title: document.title,
      unlabelled: [...document.querySelectorAll('#main input, #main select, #main textarea')]
        .filter((el) => !el.labels?.length && !el.getAttribute('aria-label')).map((el) => el.id || el.outerHTML.slice(0, 60)) }), tab));
  }
  await visit('/agents');
  await page.click('#agents-everyone');
  await page.waitForSelector(`tr[data-agent-key="${agentKey}"]`);
  facts.adminSeesAll = (await page.$$(`tr[data-agent-key="${agentKey}"]`)).length;

  // 7b. The admin's own agent, on the dead provider, falls back to echo:
  // the answer comes from echo, and the trace shows both attempts.
  await page.type('#agent-key', 'fallback-' + suffix);
  await page.select('#agent-provider', 'dead');
  await page.type('#agent-model', 'gpt-4o-mini');
  await page.click('#create-agent button[type=submit]');
  await readyPrefix('/agents/');
  const fallbackID = (await page.evaluate(() => document.getElementById('main').dataset.ready)).split('/')[2];
  facts.fallbackID = fallbackID;
  await page.click('#fallback-add');
  await page.select('#fallback-rows li:last-child select', 'echo');
  await page.type('#fallback-rows li:last-child input', 'echo-1');
  await page.type('#agent-max-tokens', '1024');
  await page.click('#edit-agent-fallbacks button[type=submit]');
  await page.waitForFunction(() => document.getElementById('fallbacks-saved')?.textContent === 'Saved.');
  await page.reload({ waitUntil: 'networkidle0' });
  await readyPrefix('/agents/');
  facts.fallbacks = await text('#agent-fallbacks');
  facts.fallbackRows = await page.$$eval('#fallback-rows li', (ls) => ls.map((l) => l.querySelector('select').value + ' / ' + l.querySelector('input').value));
  facts.maxTokens = await page.$eval('#agent-max-tokens', (el) => el.value);
  await shoot('agent-fallbacks');
  await page.click('#agent-chat');
  await readyPrefix(`/chat/fallback-${suffix}/console-`);
  await page.type('#chat-input', 'who answers');
  await page.click('#chat-send');
  await page.waitForSelector('.msg-meta .trace-link', { timeout: 20000 });
  facts.fallbackAnswer = await text('#chat-answer');
  await openTrace('trace-fallback');
  facts.attempts = await page.$$eval('#main table.spans tbody tr[data-span-type="llm"]', (rs) => rs.map((r) => r.textContent));

  // 7c. A budget on that agent, set from its page through the budgets
  // form: 10 tokens a day. A second one for the same day is refused (the
  // API's error shows); a chat turn is refused (nothing fits in 10
  // tokens); raised through the form's edit, the next turn runs and the
  // budget shows its spend.
  await page.goto(base + `/console/#/agents/${fallbackID}`, { waitUntil: 'networkidle0' });
  await ready('/agents/' + fallbackID);
  await page.click('#agent-budget');
  await readyPrefix('/gw/budgets?');
  facts.budgetPreset = await page.evaluate(() => ({ type: document.getElementById('budget-subject-type').value,
    agent: document.getElementById('budget-agent').value, agentShown: !document.getElementById('budget-agent').closest('label').hidden }));
  await page.select('#budget-period', 'day');
  await page.type('#budget-max-tokens', '10');
  await page.click('#budget-submit');
  const agentRow = `#budget-list tr[data-subject-id="${fallbackID}"]`;
  await page.waitForSelector(agentRow);
  facts.agentBudgetRow = await text(agentRow);
  await page.type('#budget-max-tokens', '20');
  globalThis.expectedStatus = 409;
  await page.click('#budget-submit');
  await page.waitForSelector('#budget-error .error');
  facts.budgetDuplicate = await text('#budget-error');
  await shoot('budgets');
  await page.goto(base + `/console/#/agents/${fallbackID}`, { waitUntil: 'networkidle0' });
  await ready('/agents/' + fallbackID);
  await page.click('#agent-chat');
  await readyPrefix(`/chat/fallback-${suffix}/console-`);
  await page.type('#chat-input', 'too much');
  await page.click('#chat-send');
  await page.waitForSelector('#chat-refused', { timeout: 20000 });
  facts.refusal = await page.$eval('#main', (m) => m.querySelector('.error[role=alert]')?.textContent || '');
  facts.refusedAnswers = (await page.$$('#chat-log .msg-assistant')).length;
  await shoot('chat-refused');
  await visit('/gw/budgets');
  await page.click(`${agentRow} .budget-edit`);
  facts.editTitle = await text('#budget-form-title');
  facts.editDisabled = await page.$eval('#budget-agent', (el) => el.disabled);
  await page.$eval('#budget-max-tokens', (el) => { el.value = ''; });
  await page.type('#budget-max-tokens', '100000');
  await page.click('#budget-submit');
  await page.waitForFunction(() => document.getElementById('budget-saved')?.textContent === 'Saved.');
  await page.waitForFunction((sel) => document.querySelector(sel)?.textContent.includes('100,000'), {}, agentRow);
  facts.editedRow = await text(agentRow);
  await page.goto(base + `/console/#/agents/${fallbackID}`, { waitUntil: 'networkidle0' });
  await ready('/agents/' + fallbackID);
  await page.click('#agent-chat');
  await readyPrefix(`/chat/fallback-${suffix}/console-`);
  await page.type('#chat-input', 'within budget');
  await page.click('#chat-send');
  await page.waitForSelector('.msg-meta .trace-link', { timeout: 20000 });
  facts.withinBudget = await text('#chat-answer');
  facts.withinBudgetMeta = await text('.msg-meta');
  for (let i = 0; i < 20; i++) { // the call's settlement follows its answer
    await visit('/gw/budgets');
    facts.spentRow = await text(agentRow);
    facts.spentTokens = await page.$eval(agentRow, (r) => Number(r.dataset.spentTokens));
    if (facts.spentTokens > 0) break;
    await new Promise((r) => setTimeout(r, 250));
  }

  // 7d. An agent on a model without a price (the "mystery" provider, a
  // stub): its run costs $0, and says it is unpriced.
  await visit('/agents');
  await page.type('#agent-key', 'unpriced-' + suffix);
  expect((await page.select('#agent-provider', 'mystery')).length === 1, 'the mystery provider is offered');
  await page.type('#agent-model', 'mystery-model-1');
  await page.click('#create-agent button[type=submit]');
  await readyPrefix('/agents/');
  await page.click('#agent-chat');
  await readyPrefix(`/chat/unpriced-${suffix}/console-`);
  await page.type('#chat-input', 'what costs nothing');
  await page.click('#chat-send');
  await page.waitForSelector('.msg-meta .trace-link', { timeout: 20000 });
  facts.unpricedAnswer = await text('#chat-answer');
  await openTrace('trace-unpriced');
  facts.unpricedTraceCost = await text('#trace-cost');
  facts.unpricedSpanCosts = await page.$$eval('#main table.spans tbody tr[data-span-type="llm"] .span-cost', (cs) => cs.map((c) => c.textContent));
  await visit('/gw/tools');
  facts.mcpState = await text('tr[data-mcp="tools"] .mcp-state');
  await shoot('mcp');
  await visit('/gw/requests');
  const row = `tr[data-request-id="${facts.request.id}"]`;
  await page.waitForSelector(row);
  await shoot('requests');
  await page.click(`${row} button.approve`);
  await page.waitForSelector(row, { hidden: true });
  await page.select('#request-status', 'approved');
  await page.waitForSelector(row);
  facts.approvedRow = await text(row);

  // 8. ... and sees the review in the activity log, filtered.
  await visit('/gw/activity');
  await page.type('#activity-action', 'mcp_request.review');
  await page.click('#activity-filter button[type=submit]');
  await page.waitForFunction(() => {
    const rows = document.querySelectorAll('#activity-list tbody tr');
    return rows.length > 0 && [...rows].every((r) => r.dataset.action === 'mcp_request.review');
  });
  facts.activity = await text('#activity-list tbody tr');
  await shoot('activity');

  // 9. The admin sees every user's traces, and makes a gateway API key (shown once).
  await visit('/traces');
  facts.adminTraces = await page.$$eval('#trace-list tbody tr', (rs) => rs.length);
  await visit('/gw/api-keys');
  await page.type('#gw-key-name', 'console-e2e');
  await page.click('#create-gw-key button[type=submit]');
  await page.waitForSelector('#revealed-key');
  facts.gwKey = await page.$eval('#revealed-key', (el) => el.value);
  await shoot('api-keys');
  await page.click('#reveal-done');

  // 9b. A budget on that key, from its row's link: $1 in total; then deleted.
  const keyID = await page.$eval('#gw-key-list tr[data-key-id]:last-child', (tr) => tr.dataset.keyId);
  await page.click(`#gw-key-list tr[data-key-id="${keyID}"] a.key-budget`);
  await readyPrefix('/gw/budgets?');
  facts.keyPreset = await page.evaluate(() => ({ type: document.getElementById('budget-subject-type').value, key: document.getElementById('budget-key').value }));
  facts.keyID = keyID;
  await page.select('#budget-period', 'total');
  await page.type('#budget-max-usd', '1');
  await page.click('#budget-submit');
  const keyRow = `#budget-list tr[data-subject-id="${keyID}"]`;
  await page.waitForSelector(keyRow);
  facts.keyBudgetRow = await text(keyRow);

  // 9c. The admin's usage page: their own budgets (the default one) and every budget.
  await visit('/usage');
  await page.waitForSelector('#usage-all-budgets');
  facts.adminBudgets = await budgetCards();
  facts.unpricedNote = await text('#usage-unpriced');
  facts.unpricedCalls = await text('#usage-unpriced-calls');
  facts.allBudgetRows = await page.$$eval('#usage-all-budgets tbody tr', (rs) => rs.map((r) => ({ type: r.dataset.subjectType, id: r.dataset.subjectId, text: r.textContent })));
  await shoot('usage-admin');
  await visit('/gw/budgets');
  await page.click(`${keyRow} .budget-delete`);
  await page.click('dialog.confirm [data-action=confirm]');
  await page.waitForSelector(keyRow, { hidden: true });
  facts.budgetRowsAfterDelete = await page.$$eval('#budget-list tbody tr', (rs) => rs.map((r) => r.dataset.subjectType));

  facts.bodies = bodies.length;
  facts.tokenInBodies = 0; // the Go test checks the token itself: it passes it as an env variable
  const token = process.env.GATEWAY_TOKEN || '';
  if (token) facts.tokenInBodies = bodies.filter((b) => b.includes(token)).length;
  facts.providerKeyInBodies = bodies.filter((b) => providerKeys.some((k) => b.includes(k))).length;
  facts.problems = problems;
  process.stdout.write(JSON.stringify({ shots, facts }));
} catch (e) {
  const pages = await browser.pages();
  const last = pages[pages.length - 1];
  const dom = last ? await last.evaluate(() => document.body.outerHTML).catch(() => '') : '';
  process.stderr.write(`${e.stack}\nproblems so far: ${JSON.stringify(globalThis.problems || [])}\npage: ${dom.slice(0, 4000)}\n`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
