// The Purge-Cache API through the official client: purgeCache with its
// scope, purgeRequests with and without since, allPurgeRequests paging.
import { taskcluster, assert, expectError, step, rootUrl, credentialsFromEnv } from './lib.mjs';

const root = credentialsFromEnv();
const pc = new taskcluster.PurgeCache({ rootUrl, credentials: root, retries: 0 });
const pool = `e2e-purge-${Date.now() % 100000}/workers`;

const before = new Date();
await pc.purgeCache(pool, { cacheName: 'cache-a' });
await pc.purgeCache(pool, { cacheName: 'cache-b' });
let res = await pc.purgeRequests(pool);
assert.deepEqual(res.requests.map((r) => r.cacheName).sort(), ['cache-a', 'cache-b']);
const [provisionerId, workerType] = pool.split('/');
for (const r of res.requests) {
  assert.equal(r.provisionerId, provisionerId);
  assert.equal(r.workerType, workerType);
  assert.ok(new Date(r.before) >= new Date(before.getTime() - 5000));
}
res = await pc.purgeRequests(pool, { since: taskcluster.fromNowJSON('1 minute') });
assert.deepEqual(res.requests, []);
res = await pc.purgeRequests(pool, { since: new Date(before.getTime() - 60000).toJSON() });
assert.equal(res.requests.length, 2);
// since is read as JavaScript's Date.parse reads it: a date alone is fine.
res = await pc.purgeRequests(pool, { since: '2020-01-01' });
assert.equal(res.requests.length, 2);
const bad = await expectError(() => pc.purgeRequests(pool, { since: 'yesterday' }), 400, 'InvalidRequestArguments');
assert.match(bad.message, /since="yesterday" is not valid/);
// A cache name with a control character (PostgreSQL cannot store a NUL) is refused on every store.
await expectError(() => pc.purgeCache(pool, { cacheName: 'nul\u0000' }), 400, 'InputValidationError');
step('purgeCache, then purgeRequests with and without since');

// A repeat moves the request forward; it stays one request.
await new Promise((r) => setTimeout(r, 20));
const first = (await pc.purgeRequests(pool)).requests.find((r) => r.cacheName === 'cache-a').before;
await pc.purgeCache(pool, { cacheName: 'cache-a' });
const again = (await pc.purgeRequests(pool)).requests.filter((r) => r.cacheName === 'cache-a');
assert.equal(again.length, 1);
assert.ok(new Date(again[0].before) > new Date(first));
step('a repeated purge is one newer request');

let all = [];
let continuationToken;
do {
  const page = await pc.allPurgeRequests(continuationToken ? { limit: 1, continuationToken } : { limit: 1 });
  all = all.concat(page.requests);
  continuationToken = page.continuationToken;
} while (continuationToken);
assert.deepEqual(all.filter((r) => `${r.provisionerId}/${r.workerType}` === pool).map((r) => r.cacheName), ['cache-a', 'cache-b']);
step('allPurgeRequests pages');

const limited = new taskcluster.PurgeCache({
  rootUrl, retries: 0,
  credentials: taskcluster.createTemporaryCredentials({ scopes: [`purge-cache:${pool}:cache-a`], expiry: taskcluster.fromNow('1 hour'), credentials: root }),
});
await limited.purgeCache(pool, { cacheName: 'cache-a' });
await expectError(() => limited.purgeCache(pool, { cacheName: 'cache-b' }), 403, 'InsufficientScopes');
await expectError(() => limited.allPurgeRequests(), 403, 'InsufficientScopes');
// The anonymous role of a new deployment may read purge requests (so
// may every client, which holds assume:anonymous), as workers without the
// scope would otherwise fail their check.
assert.equal((await limited.purgeRequests(pool)).requests.length, 2);
const anon = new taskcluster.PurgeCache({ rootUrl, retries: 0 });
assert.equal((await anon.purgeRequests(pool)).requests.length, 2);
await expectError(() => anon.purgeCache(pool, { cacheName: 'x' }), 403, 'InsufficientScopes');
await expectError(() => pc.purgeCache('not-a-pool', { cacheName: 'x' }), 400);
await expectError(() => pc.purgeCache(pool, {}), 400, 'InputValidationError');
step('scopes: purge-cache:<workerPoolId>:<cacheName>, all-purge-requests, purge-requests; input errors');

console.log('purge-cache: all passed');
