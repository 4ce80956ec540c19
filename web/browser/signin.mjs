// A person signs in to hopper's console in headless Chromium through a
// real identity provider (oidc-provider's or Gitea's own login and consent
// pages), and the console shows their identity, roles and expanded
// scopes; then, optionally, a registered website asks for credentials and
// the person allows it on the console's consent page; then they sign out.
// internal/e2e's login browser tests start everything and hand over
// HOPPER_SIGNIN_FIXTURE. Prints one "ok" line per check and "PASS all" at
// the end; any failure exits 1.
import puppeteer from 'puppeteer-core';

const fx = JSON.parse(process.env.HOPPER_SIGNIN_FIXTURE);
const T = 20000;

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  defaultViewport: { width: 1300, height: 900 },
});
const page = await browser.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
// A dialog blocks its page (no load event, no screenshot) until answered:
// dismiss it and fail with what it said rather than time out.
page.on('dialog', async (d) => {
  pageErrors.push(`dialog at ${new URL(page.url()).origin}: ${d.message()}`);
  await d.dismiss();
});
// Every request the browser makes, to check no credential rides in a URL
// or a Referer.
const requests = [];
page.on('request', (r) => requests.push({ url: r.url(), referer: r.headers().referer ?? '' }));

let step = '';
async function check(name, fn) {
  step = name;
  await fn();
  console.log(`ok ${name}`);
}

async function text(sel) {
  await page.waitForSelector(sel, { timeout: T });
  return page.$eval(sel, (e) => e.textContent);
}

/** atProvider does the provider's pages until the browser is back at hopper. */
async function atProvider() {
  for (let i = 0; i < 6 && !page.url().startsWith(fx.rootUrl); i++) {
    // A login form (oidc-provider's login and password, Gitea's user_name
    // and password) is sent with Enter; a consent page by its grant button.
    const login = (await page.$('input[name=login]')) ?? (await page.$('#user_name'));
    if (login) {
      await login.type(fx.user);
      await page.type('input[name=password]', fx.password);
      await Promise.all([page.waitForNavigation({ timeout: T }), page.keyboard.press('Enter')]);
      continue;
    }
    const submit = (await page.$('button[name=granted][value=true]')) ?? (await page.$('#authorize-app')) ?? (await page.$('form button[type=submit]'));
    if (!submit) throw new Error(`no button to press at ${new URL(page.url()).origin}: ${(await page.content()).slice(0, 400)}`);
    await Promise.all([page.waitForNavigation({ timeout: T }), submit.click()]);
  }
  if (!page.url().startsWith(fx.rootUrl)) throw new Error(`still at the provider: ${new URL(page.url()).origin}`);
}

try {
  await check('the console offers the provider', async () => {
    await page.goto(`${fx.rootUrl}/ui/#/tasks`);
    await page.click('#sign-in');
    const label = await text(`#sign-in-with-${fx.provider}`);
    if (!label.includes('Sign in with')) throw new Error(`button says ${label}`);
    await page.waitForSelector('form.signin input[name=clientId]', { timeout: T }); // the pasted form stays
  });
  await check('signs in at the provider and comes back to the page it left', async () => {
    await Promise.all([page.waitForNavigation({ timeout: T }), page.click(`#sign-in-with-${fx.provider}`)]);
    await atProvider();
    await page.waitForFunction((id) => document.querySelector('#signed-in-as')?.textContent.includes(id), { timeout: T }, fx.identity);
    if (!page.url().endsWith('#/tasks')) throw new Error(`back at ${page.url()}`);
  });
  if (fx.waitForExpiry) {
    await check('the sign-in expires: the console says so and holds no credentials', async () => {
      await page.waitForSelector('#sign-in-ended', { timeout: 180000 });
      if (await page.$('#signed-in-as')) throw new Error('still shown as signed in');
      const held = await page.evaluate(() => sessionStorage.getItem('hopper.credentials'));
      if (held) throw new Error('credentials still kept');
    });
    console.log('PASS all');
    await browser.close();
    process.exit(0);
  }
  await check('the profile shows identity, roles and expanded scopes', async () => {
    await page.click('#signed-in-as');
    await page.waitForSelector('#profile-scopes li', { timeout: T });
    const identity = await text('#profile-identity');
    if (!identity.includes(fx.identity)) throw new Error(`identity ${identity}`);
    const roles = await text('#profile-roles');
    for (const r of fx.roles ?? []) if (!roles.includes(r)) throw new Error(`roles ${roles} lack ${r}`);
    const scopes = await page.$$eval('#profile-scopes li', (l) => l.map((e) => e.textContent));
    for (const s of fx.scopes) if (!scopes.includes(s)) throw new Error(`scopes ${scopes} lack ${s}`);
    for (const s of fx.notScopes ?? []) if (scopes.includes(s)) throw new Error(`scopes ${scopes} hold ${s}`);
  });
  const accessToken = await page.evaluate(() => JSON.parse(sessionStorage.getItem('hopper.credentials') ?? '{}').accessToken ?? '');
  if (fx.authorizeUrl) {
    await check('a website asks; the person allows on the consent page', async () => {
      await page.goto(fx.authorizeUrl);
      await page.waitForSelector('#third-party-scopes li', { timeout: T });
      const client = await text('#third-party-client');
      if (client !== fx.siteClientId) throw new Error(`consent page names ${client}`);
      await Promise.all([page.waitForNavigation({ timeout: T }), page.click('#third-party-allow')]);
      const body = await page.$eval('body', (e) => e.textContent);
      if (!body.includes(fx.siteSays)) throw new Error(`the website says ${body}`);
    });
  }
  await check('signing out ends the sign-in, also for a new page', async () => {
    await page.goto(`${fx.rootUrl}/ui/#/profile`);
    await page.click('#sign-out');
    await page.waitForSelector('#sign-in', { timeout: T });
    await page.reload();
    await page.waitForSelector('#profile-signed-out', { timeout: T });
    await new Promise((r) => setTimeout(r, 500));
    if (await page.$('#signed-in-as')) throw new Error('signed in again after signing out');
  });
  if (fx.authorizeUrl) {
    await check('signed out, a website asks: the console signs the person in first, then asks for consent', async () => {
      await page.goto(fx.authorizeUrl);
      await page.waitForSelector('#third-party-sign-in', { timeout: T });
      await Promise.all([page.waitForNavigation({ timeout: T }), page.click(`#sign-in-with-${fx.provider}`)]);
      await atProvider();
      await page.waitForSelector('#third-party-allow', { timeout: T });
      await Promise.all([page.waitForNavigation({ timeout: T }), page.click('#third-party-allow')]);
      const body = await page.$eval('body', (e) => e.textContent);
      if (!body.includes(fx.siteSays)) throw new Error(`the website says ${body}`);
    });
  }
  await check('no credential in a URL or a Referer', async () => {
    if (!accessToken) throw new Error('the console held no credentials');
    for (const r of requests) {
      if (r.url.includes(accessToken) || r.referer.includes(accessToken)) throw new Error(`credentials in ${r.url}`);
      // hopper's pages (its callback's query holds the provider's code and
      // state) send no Referer; a website's own page is its business.
      if (r.referer.startsWith(fx.rootUrl) && /[?&](code|state)=/.test(r.referer)) throw new Error(`a code or state in the Referer of ${r.url}`);
    }
  });
  step = 'no page errors or dialogs';
  if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join('; ')}`);
  console.log('PASS all');
} catch (e) {
  const also = pageErrors.length && !e.message.startsWith('page errors') ? ` (page errors: ${pageErrors.join('; ')})` : '';
  console.log(`FAIL ${step}: ${e.message}${also}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
