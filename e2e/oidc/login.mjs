// A person at Chromium for `hopper login`: the address the command
// printed (LOGIN_URL), oidc-provider's sign-in and consent pages (as
// LOGIN_USER), then hopper's page for the command, where the person
// clicks LOGIN_BUTTON ("allow" or "deny"). Prints the page the browser
// reached (the command's loopback port) as JSON.
import puppeteer from 'puppeteer-core';

const { CHROMIUM, LOGIN_URL, LOGIN_USER, LOGIN_BUTTON } = process.env;
const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(180_000);
  await page.goto(LOGIN_URL);
  await page.waitForSelector('input[name="login"]');
  await page.type('input[name="login"]', LOGIN_USER);
  await page.type('input[name="password"]', 'any password');
  await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]);
  if (await page.$('input[name="prompt"][value="consent"]')) {
    await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]);
  }
  await page.waitForSelector('#allow');
  const identity = await page.$eval('#identity', (e) => e.textContent);
  await Promise.all([page.waitForNavigation(), page.click(`#${LOGIN_BUTTON}`)]);
  const reached = new URL(page.url());
  console.log(JSON.stringify({ identity, reached: `${reached.protocol}//${reached.host}${reached.pathname}`, text: await page.$eval('body', (b) => b.innerText) }));
} finally {
  await browser.close();
}
