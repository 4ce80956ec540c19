// A person at Chromium for `taskcluster signin` against hopper: the page
// the command opened (SIGNIN_URL), "Sign in with <provider>" on the
// console's command-line sign-in page, the provider's sign-in and consent
// pages (oidc-provider's, as SIGNIN_USER), back to the console, which
// creates the client and hands it to the command's callback on localhost.
// Prints "done <callback host>" once the browser reached the command.
import puppeteer from 'puppeteer-core';

const { CHROMIUM, SIGNIN_URL, SIGNIN_USER, SIGNIN_PROVIDER } = process.env;
const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(180_000);
  await page.goto(SIGNIN_URL);
  // The console's page: not signed in in this new browser.
  await page.waitForSelector(`#sign-in-with-${SIGNIN_PROVIDER}`);
  await Promise.all([page.waitForNavigation(), page.click(`#sign-in-with-${SIGNIN_PROVIDER}`)]);
  // oidc-provider's sign-in page, then its consent page.
  await page.waitForSelector('input[name="login"]');
  await page.type('input[name="login"]', SIGNIN_USER);
  await page.type('input[name="password"]', 'any password');
  await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]);
  if (await page.$('input[name="prompt"][value="consent"]')) {
    await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]);
  }
  // Back at the console, signed in: what will be created, then create it.
  await page.waitForSelector('#cli-signin-create');
  const clientId = await page.$eval('#cli-client-id', (e) => e.textContent);
  const scopes = await page.$$eval('#cli-scopes li', (l) => l.map((e) => e.textContent));
  await Promise.all([page.waitForNavigation(), page.click('#cli-signin-create')]);
  const reached = new URL(page.url());
  console.log(JSON.stringify({ clientId, scopes, reached: `${reached.protocol}//${reached.host}`, text: await page.$eval('body', (b) => b.innerText) }));
} finally {
  await browser.close();
}
