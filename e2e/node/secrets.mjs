// The Secrets service through the official client: set, get, remove and
// list with the secrets:* scopes; expired secrets answer 404 "Secret not
// found" and leave the list; list shows names only; bad input and refusals
// answer Taskcluster's error bodies with the value replaced by "(OMITTED)".
import { taskcluster, assert, expectError, step, rootUrl, credentialsFromEnv } from './lib.mjs';

const root = credentialsFromEnv();
const secrets = new taskcluster.Secrets({ rootUrl, credentials: root, retries: 0 });
const anon = new taskcluster.Secrets({ rootUrl, retries: 0 });
const auth = new taskcluster.Auth({ rootUrl, credentials: root, retries: 0 });
const run = `e2e${Date.now() % 1000000}`;
const name = `${run}/captain/db`;
const value = { password: process.env.E2E_SECRET_VALUE || `hunter-${taskcluster.slugid()}`, nested: { list: [1, 'two', null] } };
const expires = taskcluster.fromNowJSON('1 day');

assert.equal((await secrets.ping()).alive, true);
await secrets.lbheartbeat();
await secrets.heartbeat();
assert.ok((await secrets.version()).version);
step('secrets ping, heartbeats, version');

assert.deepEqual(await secrets.set(name, { secret: value, expires }), {});
let got = await secrets.get(name);
assert.deepEqual(got.secret, value);
assert.equal(new Date(got.expires).getTime(), new Date(expires).getTime());
const replaced = { password: 'second' };
assert.deepEqual(await secrets.set(name, { secret: replaced, expires }), {}, 'set twice replaces');
assert.deepEqual((await secrets.get(name)).secret, replaced);
step('set, get, set again');

// ---- scopes -------------------------------------------------------------------------
async function client(id, scopes) {
  const { accessToken } = await auth.createClient(`${run}/${id}`, {
    description: id, expires: taskcluster.fromNowJSON('1 hour'), scopes,
  });
  return new taskcluster.Secrets({ rootUrl, credentials: { clientId: `${run}/${id}`, accessToken }, retries: 0 });
}
const writer = await client('writer', [`secrets:set:${run}/captain/*`]);
const reader = await client('reader', [`secrets:get:${run}/captain/*`]);
const lister = await client('lister', ['secrets:list-secrets']);
assert.deepEqual(await writer.set(`${run}/captain/w`, { secret: { w: 1 }, expires }), {});
let err = await expectError(() => writer.set(`${run}/other`, { secret: { leaked: value.password }, expires }), 403, 'InsufficientScopes');
assert.equal(err.body.requestInfo.payload.secret, '(OMITTED)', 'the value is not echoed');
assert.ok(!JSON.stringify(err.body).includes(value.password));
await expectError(() => writer.get(`${run}/captain/w`), 403, 'InsufficientScopes');
assert.deepEqual((await reader.get(`${run}/captain/w`)).secret, { w: 1 });
await expectError(() => reader.get(`${run}/captain/missing`), 404, 'ResourceNotFound');
await expectError(() => reader.get(`${run}/other`), 403, 'InsufficientScopes');
await expectError(() => reader.remove(`${run}/captain/w`), 403, 'InsufficientScopes');
await expectError(() => reader.list(), 403, 'InsufficientScopes');
await expectError(() => anon.get(name), 403, 'InsufficientScopes');
await expectError(() => anon.list(), 403, 'InsufficientScopes');
step('secrets:set, secrets:get and secrets:list-secrets enforced; refusals do not echo values');

// ---- list: names only, paged ----------------------------------------------------
for (const n of ['a', 'b', 'c']) {
  await secrets.set(`${run}/list/${n}`, { secret: { n }, expires });
}
const names = [];
let token;
let pages = 0;
do {
  const page = await lister.list({ limit: 2, ...(token ? { continuationToken: token } : {}) });
  assert.deepEqual(Object.keys(page).filter((k) => k !== 'continuationToken'), ['secrets']);
  assert.ok(page.secrets.every((s) => typeof s === 'string'), 'names only');
  names.push(...page.secrets);
  token = page.continuationToken;
  pages++;
} while (token);
const ours = names.filter((n) => n.startsWith(`${run}/`));
assert.deepEqual(ours, [`${run}/captain/db`, `${run}/captain/w`, `${run}/list/a`, `${run}/list/b`, `${run}/list/c`]);
assert.ok(pages >= 3);
step('list pages through names only');

// ---- expiry ---------------------------------------------------------------------------
const old = `${run}/captain/expired`;
assert.deepEqual(await secrets.set(old, { secret: { stale: true }, expires: taskcluster.fromNowJSON('-2 hours') }), {});
err = await expectError(() => reader.get(old), 404, 'ResourceNotFound');
assert.match(err.message, /^Secret not found/);
assert.ok(!(await secrets.list()).secrets.includes(old), 'expired secrets are not listed');
step('expired secrets answer 404 Secret not found and are not listed');

// ---- remove ---------------------------------------------------------------------------
assert.deepEqual(await writer.remove(`${run}/captain/w`), {});
await expectError(() => reader.get(`${run}/captain/w`), 404, 'ResourceNotFound');
assert.deepEqual(await writer.remove(`${run}/captain/w`), {}, 'removing a missing secret succeeds');
step('remove');

// ---- bad input ------------------------------------------------------------------------
err = await expectError(() => secrets.set(`${run}/bad`, { secret: 'a string value', expires }), 400, 'InputValidationError');
assert.equal(err.body.requestInfo.payload.secret, '(OMITTED)');
assert.ok(!err.message.includes('a string value'));
err = await expectError(() => secrets.set(`${run}/bad`, { secret: { x: 1 } }), 400, 'InputValidationError');
assert.equal(err.body.requestInfo.payload.secret, '(OMITTED)');
await expectError(() => secrets.set(`${run}/bad`, { secret: { x: 1 }, expires: 'tomorrow' }), 400, 'InputValidationError');
await expectError(() => lister.list({ continuationToken: '!!' }), 400, 'InputError');
step('bad input answers Taskcluster error bodies without the value');
