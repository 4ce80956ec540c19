// Drives the task page's terminal in headless Chromium against a real
// hopper and worker that internal/ui's TestConsoleTerminalInBrowser
// started (HOPPER_UI_FIXTURE: rootUrl, root credentials, a failed task):
// "Create interactive task" on the failed task, then a shell in the copy
// where typing echo $TASK_ID shows the copy's id. Prints "INTERACTIVE
// <taskId>" and "PASS all"; any failure exits 1.
import puppeteer from 'puppeteer-core';

const fx = JSON.parse(process.env.HOPPER_UI_FIXTURE);
const T = 60000;
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

try {
  await page.goto(`${fx.rootUrl}/ui/`);
  await page.click('#sign-in');
  await page.type('input[name=clientId]', fx.root.clientId);
  await page.type('input[name=accessToken]', fx.root.accessToken);
  await page.click('form.signin button[type=submit]');
  await page.waitForFunction((id) => document.querySelector('.session .who')?.textContent.includes(id), { timeout: T }, fx.root.clientId);

  await page.evaluate((id) => { location.hash = `#/task/${id}`; }, fx.failedTask);
  const sel = '[data-action="create-interactive"] button';
  await page.waitForSelector(`${sel}:not([disabled])`, { timeout: T });
  await page.click(sel);
  await page.waitForFunction((old) => /^#\/task\/[A-Za-z0-9_-]{22}$/.test(location.hash) && !location.hash.endsWith(old), { timeout: T }, fx.failedTask);
  const copyId = await page.evaluate(() => location.hash.slice('#/task/'.length));
  console.log(`INTERACTIVE ${copyId}`);
  await page.waitForFunction((name) => document.querySelector('h1')?.textContent === name, { timeout: T }, `Interactive: ${fx.failedName}`);

  // The Shell card appears once the copy runs (the page follows it live).
  await page.waitForSelector('#open-shell', { timeout: T });
  await page.click('#open-shell');
  await page.waitForSelector('.shell-panel .xterm-rows', { timeout: T });
  await page.waitForFunction(() => document.querySelector('.shell-panel .hint'), { timeout: T });
  // A prompt, then typing into the terminal as a person would.
  await page.waitForFunction(() => /\S/.test(document.querySelector('.shell-panel .xterm-rows')?.textContent ?? ''), { timeout: T });
  await page.click('.shell-panel .terminal');
  await page.keyboard.type('echo "id=$TASK_ID"');
  await page.keyboard.press('Enter');
  await page.waitForFunction((id) => document.querySelector('.shell-panel .xterm-rows')?.textContent.includes(`id=${id}`), { timeout: T }, copyId);
  console.log('ok echo $TASK_ID shows the task id');

  // Resizing the window resizes the terminal, and the shell sees it.
  await page.setViewport({ width: 900, height: 700 });
  await page.keyboard.type('echo "cols=$(stty size | cut -d" " -f2)"');
  await page.keyboard.press('Enter');
  const cols = await page.waitForFunction(() => {
    const m = /cols=(\d+)/.exec(document.querySelector('.shell-panel .xterm-rows')?.textContent ?? '');
    return m && Number(m[1]);
  }, { timeout: T });
  const shellCols = await cols.jsonValue();
  const termCols = await page.evaluate(() => document.querySelector('.shell-panel .xterm-rows > div')?.textContent.length ?? 0);
  if (!(shellCols > 20 && shellCols <= termCols)) throw new Error(`the shell sees ${shellCols} columns, the terminal shows ${termCols}`);
  console.log(`ok the shell follows the terminal's size (${shellCols} columns)`);

  await page.keyboard.type('exit 4');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('.shell-panel .shell-note')?.textContent.includes('exited with code 4'), { timeout: T });
  console.log('ok exit ends the shell');
  if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join('; ')}`);
  console.log('PASS all');
} catch (e) {
  console.log(`FAIL ${e.stack}`);
  await browser.close();
  process.exit(1);
}
await browser.close();
