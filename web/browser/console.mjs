// Drives hopper's web console in headless Chromium (puppeteer-core with the
// system's Chromium) against a real hopper that internal/ui's
// TestConsoleInBrowser started and filled (HOPPER_UI_FIXTURE). Prints one
// "ok" line per check and "PASS all" at the end; any failure exits 1.
// "READY live" on stdout asks the Go side to resolve the live task, which
// answers "go" on stdin.
import puppeteer from 'puppeteer-core';
import { createInterface } from 'node:readline';
import path from 'node:path';

const fx = JSON.parse(process.env.HOPPER_UI_FIXTURE);
const ui = `${fx.rootUrl}/ui/`;
const T = 15000;

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  defaultViewport: { width: 1300, height: 900 },
});
const page = await browser.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
page.on('console', (m) => {
  if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) pageErrors.push(m.text());
});
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

let step = '';
async function check(name, fn) {
  step = name;
  const t0 = Date.now();
  await fn();
  console.log(`ok ${name} (${Date.now() - t0} ms)`);
}

async function go(hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
}

/** waitText waits for an element matching sel whose text includes text. */
async function waitText(sel, text, timeout = T) {
  await page.waitForFunction((s, t) => [...document.querySelectorAll(s)].some((e) => e.textContent.includes(t)),
    { timeout }, sel, text);
}

async function screenshot(name) {
  if (!fx.screenshots) return;
  await new Promise((r) => setTimeout(r, 300));
  await page.screenshot({ path: path.join(fx.screenshots, name) });
}

/** act clicks an Action (confirming if asked) and returns its outcome text. */
async function act(id, confirm = false) {
  const sel = `[data-action="${id}"]`;
  await page.waitForSelector(`${sel} button:not([disabled])`, { timeout: T });
  await page.click(`${sel} button`);
  if (confirm) {
    await page.waitForSelector(`${sel} .confirm-text`, { timeout: T });
    await page.click(`${sel} button`);
  }
  await page.waitForSelector(`${sel} .action-ok, ${sel} .action-error`, { timeout: T });
  return page.$eval(sel, (e) => e.textContent);
}

function expect(cond, msg) {
  if (!cond) throw new Error(msg);
}

async function signIn(creds) {
  await page.click('#sign-in');
  // The form remembers the last client ID; typing over a selection
  // replaces it.
  await page.click('input[name=clientId]', { clickCount: 3 });
  await page.type('input[name=clientId]', creds.clientId);
  await page.click('input[name=accessToken]', { clickCount: 3 });
  await page.type('input[name=accessToken]', creds.accessToken);
  await page.click('form.signin button[type=submit]');
  await waitText('.session .who', creds.clientId);
}

async function setDefinition(text) {
  await page.$eval('textarea[name=definition]', (el, t) => {
    el.value = t;
    el.dispatchEvent(new Event('input', { bubbles: true }));
  }, text);
}

try {
  await page.goto(ui);

  await check('home lists task queues', async () => {
    await waitText('h1', 'Task queues');
    await waitText('table.queues a', 'ui-test/graph');
  });

  await check('signed out, the Pools and Builds pages ask to sign in (no scope list, no Create form)', async () => {
    await go('#/pools');
    await waitText('.signin-needed', 'Sign in to see the worker pools');
    expect(!(await page.$('textarea.pool-yaml')), 'no Create form signed out');
    expect(!(await page.$('.error')), 'no raw 403');
    await go('#/github');
    await waitText('.signin-needed', 'Sign in to see the builds');
    expect(!(await page.$('.error')), 'no raw 403');
    await go('#/');
  });

  await check('sign-in with a client that may only read; cancel is refused with the queue\'s error', async () => {
    await signIn(fx.limited);
    await go(`#/task/${fx.cancelTask}`);
    await waitText('h1', 'to be cancelled');
    const out = await act('cancel', true);
    expect(out.includes('HTTP 403 InsufficientScopes'), `expected InsufficientScopes, got: ${out}`);
    // Shown whole: after the sentence ending "…missing the following
    // scopes:", the scopes themselves, without Taskcluster's details block.
    expect(/missing the following scopes:\s+one of:\s+queue:cancel-task:/.test(out), `expected the missing scopes, got: ${out}`);
    expect(!out.includes('errorCode'), `the details block is left out: ${out}`);
    await waitText('.title-row .state', 'pending');
  });

  await check('sign out, sign in as root: only temporary credentials are kept', async () => {
    await page.click('.session button.secondary');
    await page.waitForSelector('#sign-in');
    await signIn(fx.root);
    const kept = await page.evaluate(() => JSON.parse(sessionStorage.getItem('hopper.credentials')));
    expect(kept.certificate && kept.accessToken !== fx.root.accessToken, 'the permanent access token is kept in the tab');
  });

  await check('audit log: who created the limited client', async () => {
    await go(`#/audit/client/${encodeURIComponent(fx.limited.clientId)}`);
    await waitText('table.audit', 'created');
    await waitText('table.audit', fx.root.clientId);
  });

  await check('cancel', async () => {
    await go(`#/task/${fx.cancelTask}`);
    await waitText('h1', 'to be cancelled');
    const out = await act('cancel', true);
    expect(out.includes('Cancelled: the task is exception'), out);
    await waitText('.title-row .state', 'exception');
  });

  await check('rerun', async () => {
    await go(`#/task/${fx.rerunTask}`);
    await waitText('h1', 'to be rerun');
    const out = await act('rerun');
    expect(out.includes('Run 1 added'), out);
  });

  await check('retrigger with edits', async () => {
    await page.click('a[data-action=retrigger]');
    await page.waitForFunction(() => document.querySelector('textarea[name=definition]')?.value.includes('to be rerun'), { timeout: T });
    const text = await page.$eval('textarea[name=definition]', (e) => e.value);
    await setDefinition(text.replace('name: to be rerun', 'name: retriggered copy'));
    await page.click('#create-task');
    await page.waitForSelector('.action-ok a', { timeout: T });
    await page.click('.action-ok a');
    await waitText('h1', 'retriggered copy');
  });

  await check('create a task from YAML', async () => {
    await go('#/create');
    await page.waitForSelector('textarea[name=definition]');
    await setDefinition('taskQueueId: ui-test/created\npayload:\n  command: [["true"]]\n  maxRunTime: 30\nmetadata:\n  name: made from yaml\n');
    await page.click('#create-task');
    await page.waitForSelector('.action-ok a', { timeout: T });
    await page.click('.action-ok a');
    await waitText('h1', 'made from yaml');
  });

  await check('create a task from JSON; an invalid one shows InputValidationError', async () => {
    await go('#/create');
    await page.waitForSelector('textarea[name=definition]');
    await setDefinition('{"taskQueueId": "ui-test/created", "payload": {}, "metadata": {"name": "made from json"}}');
    await page.click('#create-task');
    await page.waitForSelector('.action-ok a', { timeout: T });
    await setDefinition('{"taskQueueId": "ui-test/created", "priority": "urgent-ish", "retries": 200, "payload": {}}');
    await page.click('#create-task');
    await waitText('.action-error', 'InputValidationError');
    // Every violation, not only the sentence that announces them.
    const refused = await page.$eval('.action-error', (e) => e.textContent);
    expect(refused.includes('does not match schema create-task-request:') && refused.includes('/priority: value must be one of') &&
      refused.includes('/retries: maximum: got 200, want 49'), `expected each schema violation, got: ${refused}`);
  });

  await check('task page with log, artifacts and runs', async () => {
    await go(`#/task/${fx.logTask}`);
    await waitText('pre.log', 'linking');
    await waitText('a.artifact', 'public/logs/live_backing.log');
    // The notifications its routes produced, and what became of them.
    await waitText('table.notifications', 'is not configured on this hopper');
    const notes = await page.$eval('table.notifications', (e) => e.textContent);
    expect(notes.includes('webhook') && notes.includes('failed') && notes.includes('refused') && notes.includes('not a plain email address'),
      `expected the webhook failed and the address refused, got: ${notes}`);
    await screenshot('ui-task.png');
  });

  await check('a cancelled task keeps the output it was streaming, then its uploaded log', async () => {
    await go(`#/task/${fx.streamTask}`);
    await waitText('pre.log', 'streamed before the cancel');
    const out = await act('cancel', true);
    expect(out.includes('Cancelled'), out);
    // The text stays while the run ends and the worker uploads its log…
    await waitText('.title-row .state', 'exception');
    const during = await page.$eval('pre.log', (e) => e.textContent);
    expect(during.includes('streamed before the cancel'), `the streamed output vanished at the cancel: ${during}`);
    // …which then replaces it, with the worker's last word.
    await waitText('.log-head', 'live_backing.log');
    await waitText('pre.log', '=== Task Stopped ===');
    const after = await page.$eval('pre.log', (e) => e.textContent);
    expect(after.includes('streamed before the cancel'), after);
    // The artifacts card lists the uploaded log without a reload.
    await page.waitForFunction(() => [...document.querySelectorAll('.mono')].some((e) => e.textContent === 'public/logs/live_backing.log'), { timeout: T });
  });

  await check('group as a dependency graph with the critical path', async () => {
    await go(`#/group/${fx.group}/graph`);
    await page.waitForSelector('.graph svg a.node', { timeout: T });
    const nodes = await page.$$eval('.graph svg a.node', (n) => n.length);
    expect(nodes === fx.groupSize, `graph shows ${nodes} nodes, want ${fx.groupSize}`);
    const critical = await page.$$eval('.graph svg a.node.critical', (n) => n.length);
    expect(critical >= 3, `critical path has ${critical} nodes`);
    await screenshot('ui-group-graph.png');
  });

  await check('a deep graph fits the width, then zooms', async () => {
    await go(`#/group/${fx.deepGroup}/graph`);
    await page.waitForSelector(`.graph svg a.node[data-task="${fx.deepLast}"]`, { timeout: T });
    const fits = () => page.$eval('.graph', (e) => e.scrollWidth <= e.clientWidth);
    await page.waitForFunction(() => { const e = document.querySelector('.graph'); return e.scrollWidth <= e.clientWidth; }, { timeout: T });
    const drawn = await page.$$eval('.graph svg a.node', (n) => n.length);
    expect(drawn === fx.deepSize, `the fitted graph draws ${drawn} of ${fx.deepSize} tasks`);
    const scale = () => page.$eval('.zoom-level', (e) => parseFloat(e.dataset.scale));
    const fitted = await scale();
    expect(fitted < 0.5, `a ${fx.deepSize}-level graph fits at ${fitted}`);
    await screenshot('ui-deep-graph.png');
    await page.click('[data-zoom="in"]');
    await page.click('[data-zoom="in"]');
    await page.waitForFunction((s) => parseFloat(document.querySelector('.zoom-level').dataset.scale) > s, { timeout: T }, fitted);
    expect(!(await fits()), 'zoomed in, the graph scrolls');
    await page.click('[data-zoom="fit"]');
    await page.waitForFunction((s) => parseFloat(document.querySelector('.zoom-level').dataset.scale) === s, { timeout: T }, fitted);
    expect(await fits(), 'fitted again');
  });

  await check('group as a timeline with the critical path', async () => {
    await go(`#/group/${fx.group}/timeline`);
    await page.waitForSelector('.timeline .trow', { timeout: T });
    const rows = await page.$$eval('.timeline .trow', (n) => n.length);
    expect(rows >= 8, `timeline shows ${rows} runs`);
    const critical = await page.$$eval('.timeline .trow.critical', (n) => n.length);
    expect(critical >= 3, `critical path marks ${critical} runs`);
    await screenshot('ui-group-timeline.png');
  });

  await check('cancel and seal a task group', async () => {
    await go(`#/group/${fx.groupToEnd}`);
    await waitText('.card h2', '0 / 2 resolved');
    const refused = await act('cancel-group', true);
    expect(refused.includes('HTTP 409 RequestConflict') && refused.includes('must be sealed'), refused);
    const sealed = await act('seal-group', true);
    expect(sealed.includes('Sealed at'), sealed);
    const cancelled = await act('cancel-group', true);
    expect(cancelled.includes('Cancelled 2 of 2'), cancelled);
    await waitText('.card h2', '2 / 2 resolved');
    // Opened again, the resolved group has nothing left to cancel.
    await go('#/');
    await go(`#/group/${fx.groupToEnd}`);
    await waitText('.card h2', '2 / 2 resolved');
    await page.waitForSelector('[data-action="seal-group"]', { timeout: T });
    expect(!(await page.$('[data-action="cancel-group"]')), 'a resolved group offers Cancel group');
  });

  await check('workers: provisioner → worker type → worker; quarantine', async () => {
    const [prov, wt, wg, wid] = fx.worker;
    await go('#/workers');
    await waitText('ul.plain a', prov);
    await go(`#/workers/${prov}`);
    await waitText('ul.plain a', wt);
    await go(`#/workers/${prov}/${wt}`);
    await waitText('table a', `${wg}/${wid}`);
    await page.click('table a.mono');
    await waitText('h1', `${wg}/${wid}`);
    const out = await act('quarantine');
    expect(out.includes('Quarantined until'), out);
    await waitText('dd', 'until ');
    // Its recent tasks have their names, states and durations.
    await waitText('table.recent-tasks td', 'run by the worker to quarantine');
    await waitText('table.recent-tasks td', 'completed');
    await waitText('dt', 'State');
    await waitText('dt', 'Slots');
    await waitText('.card h2', 'Running now');
    // The real worker polls its queue: online, its capacity known.
    await go('#/workers/ui-test/worker');
    await waitText('table.workers td .liveness', 'online');
    await waitText('table.workers td.slots', 'of 1 busy');
    // Without a sign-in, the quarantine form is a sign-in form.
    const tab = await browser.newPage();
    tab.on('pageerror', (e) => pageErrors.push(e.message));
    await tab.goto(`${ui}#/worker/${prov}/${wt}/${wg}/${wid}`);
    await tab.waitForSelector('form[aria-label="Sign in to quarantine"]', { timeout: T });
    expect(await tab.$('[data-action="quarantine"]') === null, 'an anonymous viewer sees no quarantine button');
    await tab.close();
  });

  await check('the group list sorts by pipeline order and by state', async () => {
    await go(`#/group/${fx.group}/list`);
    await page.waitForSelector('.members .member', { timeout: T });
    const names = () => page.$$eval('.members .vrow', (rows) => rows.sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
      .map((r) => r.querySelector('a').textContent));
    const pipeline = await names();
    const at = (n) => pipeline.indexOf(n);
    expect(at('decision') < at('build linux') && at('build linux') < at('test linux 1/2') && at('test mac') < at('package') &&
      pipeline[pipeline.length - 1] === 'publish', `pipeline order: ${pipeline}`);
    await page.select('select[name=order]', 'state');
    await page.waitForFunction(() => document.querySelector('.members .vrow a')?.textContent === 'sign', { timeout: T });
  });

  await check('a task blocked by a failed dependency says so', async () => {
    await go(`#/task/${fx.blockedTask}`);
    await waitText('h1', 'needs the failed one');
    await waitText('.notice.blocked', 'fails on purpose failed');
    await waitText('.notice.blocked', 'will not run');
  });

  await check('the timeline axis ticks at round steps', async () => {
    await go(`#/group/${fx.group}/timeline`);
    await page.waitForSelector('.timeline .axis .tick', { timeout: T });
    const labels = await page.$$eval('.timeline .axis .tick', (t) => t.map((e) => e.textContent));
    expect(labels.length >= 2 && / [A-Z]+[+-]?\d*$/.test(labels[0]), `first tick names the start with its zone: ${labels}`);
    const steps = labels.slice(1).map((l) => l.replace(/^\+/, ''));
    expect(steps.every((l) => /^(\d+ ms|\d+ s|\d+ min( \d+ s)?|\d+ h( \d+ min)?)$/.test(l)), `round labels: ${labels}`);
  });

  await check('a resolved task offers no Cancel', async () => {
    await go(`#/task/${fx.failedTask}`);
    await waitText('h1', 'fails on purpose');
    await page.waitForSelector('[data-action="rerun"]', { timeout: T });
    expect(await page.$('[data-action="cancel"]') === null, 'Cancel shown on a failed task');
  });

  await check('a superseded task links to its successor', async () => {
    await go(`#/task/${fx.superseded}`);
    await page.waitForSelector(`.notice.superseded a[href="#/task/${fx.successor}"]`, { timeout: T });
  });

  await check('a private artifact opens through a signed link', async () => {
    await page.click(`.notice.superseded a[href="#/task/${fx.successor}"]`);
    await waitText('h1', 'newer build');
    await page.waitForSelector('a.artifact[href*="bewit="]', { timeout: T });
    const href = await page.$eval('a.artifact[href*="bewit="]', (a) => a.href);
    expect(href.includes('/artifacts/private/report.txt?bewit='), href);
    const body = await page.evaluate(async (u) => (await fetch(u)).text(), href);
    expect(body === 'for signed-in eyes only', `signed link gave: ${body.slice(0, 200)}`);
  });

  await check('task list across queues, filtered by state and queue', async () => {
    // Queues are listed once a worker asked them for work (as in
    // Taskcluster): ui-test/graph has, and its one pending task is "sign".
    await go('#/tasks?state=pending&queue=ui-test/graph');
    await waitText('.task-rows a', 'sign');
    const n = await page.$eval('.task-rows', (e) => Number(e.dataset.rows));
    expect(n === 1, `filter shows ${n} tasks`);
  });

  await check('task history: failed tasks, a queue no worker polled, a name search; times name their zone', async () => {
    await go('#/tasks?state=failed');
    await page.waitForSelector(`.task-rows a[href="#/task/${fx.failedTask}"]`, { timeout: T });
    const shown = await page.$$eval('.task-rows .member', (rows) => rows.map((r) => r.textContent));
    expect(shown.every((r) => r.startsWith('failed')), `only failed tasks: ${shown}`);
    const when = await page.$eval('.task-rows .member .small', (e) => e.textContent);
    expect(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (UTC|GMT[+-]?\d*|[A-Z]{2,5})$/.test(when), `a time with its zone: ${when}`);
    await go('#/tasks?state=exception&queue=ui-test/unpolled');
    await page.waitForSelector(`.task-rows a[href="#/task/${fx.unpolledTask}"]`, { timeout: T });
    await go('#/tasks');
    await page.waitForSelector('.task-rows .member', { timeout: T });
    await page.click('input[name=name]', { clickCount: 3 });
    await page.type('input[name=name]', 'FAILS ON');
    await page.click('#tasks-search');
    await page.waitForFunction((id) => {
      const rows = document.querySelectorAll('.task-rows .member');
      return rows.length === 1 && rows[0].querySelector(`a[href="#/task/${id}"]`);
    }, { timeout: T }, fx.failedTask);
    const hash = await page.evaluate(() => location.hash);
    expect(hash === '#/tasks?name=FAILS+ON', `the filter is in the address: ${hash}`);
  });

  await check('index: namespaces and the task indexed under them', async () => {
    await go('#/index');
    await waitText('ul.plain a', 'ui-test');
    await page.click('ul.plain a');
    await waitText('ul.plain a', 'builds');
    await go('#/index/ui-test/builds');
    await page.waitForSelector(`ul.plain a[href="#/task/${fx.indexedTask}"]`, { timeout: T });
  });

  await check('secrets: names only', async () => {
    await go('#/secrets');
    await waitText('ul.secrets li', 'ui-test/db-password');
    const html = await page.content();
    expect(!html.includes('never-shown-in-the-ui'), 'a secret value reached the page');
  });

  await check('hooks: group → hook → trigger', async () => {
    await go('#/hooks');
    await waitText('ul.plain a', 'ui-test');
    await go('#/hooks/ui-test');
    await waitText('ul.plain a', 'nightly');
    await go('#/hooks/ui-test/nightly');
    await waitText('.card h2', 'nightly build');
    const out = await act('trigger-hook');
    expect(out.includes('Created task'), out);
  });

  await check('pools: capacity, a worker removed, a pool created from YAML', async () => {
    await go('#/pools');
    await waitText('table.pools a', 'ui-test/pool');
    await go('#/pools/ui-test%2Fpool');
    await waitText('.capacity', 'running 1');
    await waitText('table.pool-workers', 'rack/m1');
    await waitText('.worker-state', 'running');
    // The row's Remove button goes once the worker is stopped: its state
    // is the outcome.
    const sel = '[data-action="remove-rack-m1"]';
    await page.click(`${sel} button`);
    await page.waitForSelector(`${sel} .confirm-text`, { timeout: T });
    await page.click(`${sel} button`);
    await waitText('.worker-state', 'stopped');
    await waitText('.capacity', 'running 0');
    await go('#/pools');
    await page.waitForSelector('textarea.pool-yaml');
    await page.$eval('textarea.pool-yaml', (el) => {
      el.value = 'workerPoolId: ui-test/made-here\nproviderId: static\ndescription: made in the console\nowner: ui@example.com\nemailOnError: false\nconfig: {}\n';
      el.dispatchEvent(new Event('input', { bubbles: true }));
    });
    const made = await act('create-pool');
    expect(made.includes('created'), made);
    await waitText('table.pools a', 'ui-test/made-here');
  });

  await check('live: the task page and (in an anonymous tab) its group update when the task resolves elsewhere', async () => {
    await go(`#/task/${fx.liveTask}`);
    await waitText('.title-row .state', 'pending');
    await page.waitForSelector('.title-row .live.on', { timeout: T });
    // The task is its own group.
    const tab = await browser.newPage();
    tab.on('pageerror', (e) => pageErrors.push(e.message));
    await tab.goto(`${ui}#/group/${fx.liveTask}`);
    await tab.waitForFunction(() => [...document.querySelectorAll('.card h2')].some((e) => e.textContent.includes('0 / 1 resolved')), { timeout: T });
    await tab.waitForSelector('.title-row .live.on', { timeout: T });
    console.log('READY live');
    const answer = await lines.next();
    expect(answer.value === 'go', `unexpected answer ${answer.value}`);
    // The task page is in a background tab now, where animation frames
    // (waitForFunction's default polling) do not run: poll by time. The
    // events may come a moment after the run resolves (streams are
    // written at most every 250 ms).
    await page.waitForFunction((s, t) => [...document.querySelectorAll(s)].some((e) => e.textContent.includes(t)),
      { timeout: 10000, polling: 100 }, '.title-row .state', 'completed');
    await tab.waitForFunction(() => [...document.querySelectorAll('.card h2')].some((e) => e.textContent.includes('1 / 1 resolved')), { timeout: 10000 });
    await tab.close();
  });

  await check('taskcluster signin: sign in on its page, create the client, hand it to the command', async () => {
    // A new tab has no session, like the browser tab the command opens.
    const tab = await browser.newPage();
    tab.on('pageerror', (e) => pageErrors.push(e.message));
    await tab.goto(fx.cliSigninRefused);
    await tab.waitForSelector('#cli-signin-refused', { timeout: T });
    const refused = await tab.$eval('#cli-signin-refused', (e) => e.textContent);
    expect(refused.includes('is not allowed'), refused);
    await tab.goto(fx.cliSignin);
    await tab.waitForSelector('form[aria-label="Sign in to continue"]', { timeout: T });
    await tab.type('input[name=clientId]', fx.root.clientId);
    await tab.type('input[name=accessToken]', 'not-the-token');
    await tab.click('form.signin button[type=submit]');
    await tab.waitForSelector('form.signin .error', { timeout: T });
    const wrong = await tab.$eval('form.signin .error', (e) => e.textContent);
    expect(wrong.includes('AuthenticationFailed') && wrong.includes('check the access token'), `a wrong token gives the CLI's hint: ${wrong}`);
    await tab.click('input[name=accessToken]', { clickCount: 3 });
    await tab.type('input[name=accessToken]', fx.root.accessToken);
    await tab.click('form.signin button[type=submit]');
    await tab.waitForSelector('#cli-client-id', { timeout: T });
    const id = await tab.$eval('#cli-client-id', (e) => e.textContent);
    expect(id === 'taskcluster/root/cli-AbC123', `client id ${id}`);
    const scopes = await tab.$$eval('#cli-scopes li', (l) => l.map((e) => e.textContent));
    expect(scopes.join(' ') === 'auth:get-client:taskcluster/root/cli-* queue:get-task:*', `scopes ${scopes}`);
    if (fx.screenshots) await tab.screenshot({ path: path.join(fx.screenshots, 'ui-cli-signin.png') });
    await tab.click('#cli-signin-create');
    await tab.waitForFunction(() => document.querySelector('h1')?.textContent.includes('You have successfully signed in'), { timeout: T });
    await tab.close();
  });

  if (fx.bigGroup) {
    await check(`a ${fx.bigSize}-task group`, async () => {
      const t0 = Date.now();
      await go(`#/group/${fx.bigGroup}/list`);
      await page.waitForSelector(`.members[data-rows="${fx.bigSize}"]`, { timeout: 120000 });
      console.log(`TIMING load and list ${fx.bigSize} tasks: ${Date.now() - t0} ms`);
      for (const [tab, sel] of [['graph', '.graph svg a.node'], ['timeline', '.timeline .trow'], ['list', '.members .member']]) {
        const t1 = Date.now();
        await page.click(`.tabs a[href$="/${tab}"]`);
        await page.waitForSelector(sel, { timeout: 60000 });
        console.log(`TIMING switch to ${tab} of ${fx.bigSize} tasks: ${Date.now() - t1} ms`);
      }
      await page.click('.tabs a[href$="/graph"]');
      await page.waitForSelector('.graph svg a.node');
      // The graph opens fitted to the width, where all of it is in view:
      // scrolling (and drawing only what is in view) is at full size.
      await page.click('[data-zoom="actual"]');
      await page.waitForSelector('.zoom-level[data-scale="1.000"]', { timeout: T });
      const t2 = Date.now();
      await page.$eval('.graph', (e) => { e.scrollTop = e.scrollHeight / 2; e.scrollLeft = e.scrollWidth / 2; });
      await page.waitForFunction(() => document.querySelector('.graph').scrollTop > 0 && document.querySelectorAll('.graph a.node').length > 0);
      console.log(`TIMING scroll the graph of ${fx.bigSize} tasks: ${Date.now() - t2} ms`);
      if (fx.screenshots) await page.screenshot({ path: path.join(fx.screenshots, 'ui-big-graph.png') });
    });
  }

  expect(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
  console.log('PASS all');
} catch (e) {
  console.log(`FAIL ${step}: ${e.message}`);
  if (pageErrors.length) console.log(`page errors: ${pageErrors.join('; ')}`);
  try {
    await page.screenshot({ path: path.join(process.env.TMPDIR || '/tmp', 'hopper-ui-failure.png') });
    console.log(`screenshot of the failure: ${path.join(process.env.TMPDIR || '/tmp', 'hopper-ui-failure.png')}`);
  } catch { /* the browser may be gone */ }
  await browser.close();
  process.exit(1);
}
await browser.close();
process.exit(0);
