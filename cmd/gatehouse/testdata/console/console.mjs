// Drives the gatehouse web console in headless Chromium, as a user would,
// for TestConsoleInChromium (../../console_test.go).
//
//   node console.mjs <chromium> <base URL> <admin email> <admin password> <screenshot dir>
//
// Prints one JSON object: {shots: [{page, file, text}], facts: {...}}.
// Any failed expectation throws: the process exits non-zero with the
// reason on stderr.
import puppeteer from 'puppeteer-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const [chromium, base, adminEmail, adminPassword, shotDir] = process.argv.slice(2);
mkdirSync(shotDir, { recursive: true });
const suffix = Math.random().toString(36).slice(2, 8);
const keyName = `console-e2e-${suffix}`;
const facts = { keyName };
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
  await page.setViewport({ width: 1200, height: 900 });
  const problems = [];
  globalThis.problems = problems;
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  // A 401 is how the page learns it has no session: not a problem.
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 401/.test(m.text())) problems.push('console error: ' + m.text());
  });
  page.on('requestfailed', (r) => problems.push('request failed: ' + r.url()));
  await page.evaluateOnNewDocument(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`);
    });
  });

  const ready = (route) => page.waitForFunction(
    (r) => document.getElementById('main')?.dataset.ready === r, { timeout: 15000 }, route);
  const shoot = async (name) => {
    const file = join(shotDir, name + '.png');
    await page.screenshot({ path: file, fullPage: true });
    const text = await page.evaluate(() => document.body.innerText);
    const junk = text.match(/\b(null|undefined|NaN)\b|\[object /);
    expect(!junk, `page ${name} shows "${junk && junk[0]}":\n${text}`);
    shots.push({ page: name, file, text });
  };
  const text = (sel) => page.$eval(sel, (el) => el.textContent.trim());
  const confirm = async (button) => {
    await page.click(button);
    await page.waitForSelector('dialog[open] [data-action="confirm"]');
    await page.click('dialog[open] [data-action="confirm"]');
  };
  const validate = async (key) => {
    const r = await fetch(base + '/api/keys/validate', { method: 'POST', headers: { 'X-API-Key': key } });
    return { status: r.status, body: await r.json() };
  };

  // 1. The root sends a stranger to the login page.
  await page.goto(base + '/', { waitUntil: 'networkidle0' });
  await ready('/login');
  facts.csp = (await page.goto(base + '/console/', { waitUntil: 'networkidle0' })).headers()['content-security-policy'];
  await ready('/login');
  await shoot('login');
  await page.type('#email', adminEmail);
  await page.type('#password', adminPassword);
  await page.click('#login-form button[type=submit]');
  await ready('/keys');
  expect((await text('#who')).includes(adminEmail), 'the header names the user');

  // 2. Create a key: shown once, with a copy button.
  await page.type('#key-name', keyName);
  await page.click('#create-key button[type=submit]');
  await page.waitForSelector('#revealed-key');
  const key = await page.$eval('#revealed-key', (el) => el.value);
  expect(/^svc_live_/.test(key), 'the page shows the full key: ' + key.slice(0, 12));
  expect((await text('.reveal .warning')).includes('You will not see it again'), 'the warning');
  await page.click('#copy-key');
  await page.waitForFunction(() => document.querySelector('.copied')?.textContent === 'Copied.');
  await shoot('created');
  const stored = await page.evaluate(() => JSON.stringify({ l: { ...localStorage }, s: { ...sessionStorage }, c: document.cookie, u: location.href }));
  expect(!stored.includes(key) && !stored.includes(key.slice(9)), 'the key is not in storage, cookies or the URL');
  await page.click('#reveal-done');
  const html = await page.evaluate(() => document.documentElement.outerHTML);
  expect(!html.includes(key.slice(9)), 'the key is gone from the page once saved');
  const row = await page.waitForSelector(`tr[data-key-id] ::-p-text(${keyName})`);
  expect(row, 'the new key is listed');
  facts.listStatus = await page.$eval('#key-list tbody tr', (tr) => tr.querySelector('[data-status]').dataset.status);

  // 3. Use it: validate (free) and three proxied requests (counted).
  facts.validate = await validate(key);
  facts.proxy = [];
  for (let i = 0; i < 3; i++) {
    const r = await fetch(`${base}/api/proxy/echo/v1/hello?n=${i}`, { headers: { 'X-API-Key': key } });
    facts.proxy.push({ status: r.status, limit: r.headers.get('x-ratelimit-limit'), remaining: r.headers.get('x-ratelimit-remaining') });
  }

  // 4. The key's page: the window and the chart show those requests.
  await page.click(`a.key-name ::-p-text(${keyName})`);
  await page.waitForFunction(() => /^\/keys\/[0-9a-f-]{36}$/.test(document.getElementById('main')?.dataset.ready || ''));
  facts.keyId = (await page.evaluate(() => document.getElementById('main').dataset.ready)).split('/')[2];
  await page.waitForSelector('#usage-chart canvas');
  facts.windowUsed = await text('#window-used');
  facts.chartTotal = await page.$eval('#usage-chart', (el) => el.dataset.total);
  facts.todayCount = await page.$eval('#usage-table tbody tr:last-child td.num', (el) => el.textContent.trim());
  await shoot('key');
  await page.select('#usage-days', '30');
  await page.waitForFunction(() => document.querySelectorAll('#usage-table tbody tr').length === 30);
  facts.chartTotal30 = await page.$eval('#usage-chart', (el) => el.dataset.total);

  // An admin changes the key's rate limit; the page and the proxy follow.
  await page.click('#edit-key summary, details:has(#edit-key) > summary');
  await page.$eval('#edit-limit', (el) => { el.value = ''; });
  await page.type('#edit-limit', '5000');
  await page.click('#edit-key button[type=submit]');
  await page.waitForFunction(() => document.getElementById('window-limit')?.textContent === '5,000');
  const limited = await fetch(`${base}/api/proxy/echo/v1/hello`, { headers: { 'X-API-Key': key } });
  facts.limitAfterEdit = limited.headers.get('x-ratelimit-limit');

  // 5. Rotate: the new key shown once, the old one's grace as a countdown.
  await confirm('#key-rotate');
  await page.waitForSelector('#revealed-key');
  const rotated = await page.$eval('#revealed-key', (el) => el.value);
  expect(/^svc_live_/.test(rotated) && rotated !== key, 'a new key');
  const cd1 = await text('#rotate-countdown');
  await new Promise((r) => setTimeout(r, 1200));
  const cd2 = await text('#rotate-countdown');
  expect(/^2[34]h \d\dm \d\ds$/.test(cd1) && cd1 !== cd2, `the grace countdown runs: ${cd1} → ${cd2}`);
  facts.statusAfterRotate = await page.$eval('.facts [data-status]', (el) => el.dataset.status);
  await shoot('rotated');
  facts.afterRotate = { old: (await validate(key)).status, new: (await validate(rotated)).status };
  await page.click('#reveal-done');

  // 6. Revoke, after confirming: both secrets die at once.
  await confirm('#key-revoke');
  await page.waitForFunction(() => document.querySelector('.facts [data-status]')?.dataset.status === 'revoked');
  await shoot('revoked');
  facts.afterRevoke = { old: (await validate(key)).status, new: (await validate(rotated)).status };

  // 7. As admin: create a user, who makes a key through the API; view it.
  await page.click('nav a[href="#/users"]');
  await ready('/users');
  const userEmail = `user-${suffix}@example.com`;
  await page.type('#new-user-email', userEmail);
  await page.type('#new-user-password', 'a-user-password-1');
  await page.select('#new-user-plan', 'premium');
  await page.click('#create-user button[type=submit]');
  await page.waitForSelector(`tr[data-email="${userEmail}"]`);
  facts.userPlan = await page.$eval(`tr[data-email="${userEmail}"] .user-plan`, (el) => el.value);
  await shoot('users');
  const login = await fetch(base + '/api/auth/login', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ email: userEmail, password: 'a-user-password-1' }) });
  expect(login.status === 200, 'the new user logs in: ' + login.status);
  const cookie = login.headers.get('set-cookie').split(';')[0];
  const theirs = `theirs-${suffix}`;
  const made = await fetch(base + '/api/keys', { method: 'POST', headers: { 'Content-Type': 'application/json', Cookie: cookie },
    body: JSON.stringify({ name: theirs }) });
  expect(made.status === 201, 'the user creates a key: ' + made.status);
  // Switch their license off inline; the row is redrawn from the API.
  await page.click(`tr[data-email="${userEmail}"] .user-license`);
  await page.waitForFunction((e) => !document.querySelector(`tr[data-email="${e}"] .user-license`)?.checked &&
    document.querySelector(`tr[data-email="${e}"] label.switch`)?.textContent.includes('off'), {}, userEmail);
  // The change ended their sessions; logged in again, they may not create keys.
  facts.oldSession = (await fetch(base + '/api/auth/me', { headers: { Cookie: cookie } })).status;
  const again = await fetch(base + '/api/auth/login', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ email: userEmail, password: 'a-user-password-1' }) });
  const noLicense = await fetch(base + '/api/keys', { method: 'POST',
    headers: { 'Content-Type': 'application/json', Cookie: again.headers.get('set-cookie').split(';')[0] },
    body: JSON.stringify({ name: 'refused' }) });
  facts.createWithoutLicense = noLicense.status;
  await page.click(`tr[data-email="${userEmail}"] a.view-keys`);
  await page.waitForFunction(() => /^\/users\/[0-9a-f-]{36}\/keys$/.test(document.getElementById('main')?.dataset.ready || ''));
  await page.waitForSelector(`a.key-name ::-p-text(${theirs})`);
  facts.viewAsTitle = await text('h1');
  facts.theirs = theirs;
  await shoot('user-keys');

  // 7b. The user, in their own browser session: their keys, no admin
  // pages, and the API's refusal (no license now) shown on the page.
  const ctx2 = await browser.createBrowserContext();
  const p2 = await ctx2.newPage();
  p2.on('pageerror', (e) => problems.push('user page error: ' + e.message));
  const ready2 = (route) => p2.waitForFunction(
    (r) => document.getElementById('main')?.dataset.ready === r, { timeout: 15000 }, route);
  await p2.goto(base + '/console/', { waitUntil: 'networkidle0' });
  await ready2('/login');
  await p2.type('#email', userEmail);
  await p2.type('#password', 'a-user-password-1');
  await p2.click('#login-form button[type=submit]');
  await ready2('/keys');
  facts.userSeesTheirs = (await p2.$$(`a.key-name ::-p-text(${theirs})`)).length;
  facts.userHasUsersLink = (await p2.$$('nav a[href="#/users"]')).length;
  await p2.type('#key-name', 'not-allowed');
  await p2.click('#create-key button[type=submit]');
  await p2.waitForSelector('#create-key .error');
  facts.userCreateError = await p2.$eval('#create-key .error', (el) => el.textContent);
  await p2.evaluate(() => { location.hash = '#/users'; });
  await ready2('/users');
  facts.userUsersPage = await p2.$eval('h1', (el) => el.textContent);
  await ctx2.close();

  // 8. Delete the revoked key, after confirming; log out.
  await page.click('nav a[href="#/keys"]');
  await ready('/keys');
  facts.listStatusRevoked = await page.$eval(`tr[data-key-id="${facts.keyId}"] [data-status]`, (el) => el.dataset.status);
  await page.click(`a.key-name ::-p-text(${keyName})`);
  await ready('/keys/' + facts.keyId);
  await confirm('#key-delete');
  await ready('/keys');
  facts.listedAfterDelete = (await page.$$(`a.key-name ::-p-text(${keyName})`)).length;
  await page.click('#logout');
  await ready('/login');
  facts.meAfterLogout = await page.evaluate(async () => (await fetch('/api/auth/me')).status);

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
