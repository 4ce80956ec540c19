// The scopes each method of Object, Purge-Cache, Index, Secrets and Hooks
// asks for, exactly as Taskcluster names them (hooks:get uses a colon
// between group and hook, every other hooks scope a slash): each call
// succeeds with only that scope (authorizedScopes) and fails with
// InsufficientScopes given a near miss. Every service also answers the
// monitoring methods the client knows (ping, lbheartbeat, heartbeat, version).
import { taskcluster, assert, expectError, step, rootUrl, credentialsFromEnv } from './lib.mjs';

const root = credentialsFromEnv();
const run = `e2escopes${Date.now() % 1000000}`;
const as = (Cls, scopes) => new Cls({ rootUrl, credentials: root, retries: 0, authorizedScopes: scopes });

// check calls fn with exactly `scopes`, then with each of `misses`.
async function check(Cls, scopes, misses, fn) {
  await fn(as(Cls, scopes));
  for (const miss of misses) {
    await expectError(() => fn(as(Cls, miss)), 403, 'InsufficientScopes');
  }
}

const hooks = new taskcluster.Hooks({ rootUrl, credentials: root, retries: 0 });
const auth = new taskcluster.Auth({ rootUrl, credentials: root, retries: 0 });
const G = run, H = 'nightly/build';
const def = { metadata: { name: 'n', description: 'd', owner: 'o@example.com' }, task: { $if: 'false', then: {} } };
await auth.createRole(`hook-id:${G}/*`, { description: 'e2e', scopes: [] });
await hooks.createHook(G, H, def);
await hooks.triggerHook(G, H, {});
await hooks.createHook(G, 'fires', { ...def, task: { taskQueueId: 'e2e/none', payload: {}, metadata: { ...def.metadata, source: 'https://example.com' } } });
await hooks.triggerHook(G, 'fires', {}).catch(() => {}); // a failed fire (the role has no scopes) is still a fire
const Hk = taskcluster.Hooks;
await check(Hk, ['hooks:list-hooks:'], [['hooks:list-hooks:x']], (c) => c.listHookGroups());
await check(Hk, [`hooks:list-hooks:${G}`], [['hooks:list-hooks:other']], (c) => c.listHooks(G));
await check(Hk, [`hooks:get:${G}:${H}`], [[`hooks:get:${G}/${H}`]], (c) => c.hook(G, H));
await check(Hk, [`hooks:status:${G}/${H}`], [[`hooks:status:${G}:${H}`]], (c) => c.getHookStatus(G, H));
await check(Hk, [`hooks:modify-hook:${G}/x`, `assume:hook-id:${G}/x`], [[`hooks:modify-hook:${G}/x`], [`assume:hook-id:${G}/x`]],
  (c) => c.createHook(G, 'x', def));
await check(Hk, [`hooks:modify-hook:${G}/x`, `assume:hook-id:${G}/x`], [[`hooks:modify-hook:${G}/x`]], (c) => c.updateHook(G, 'x', def));
await check(Hk, [`hooks:modify-hook:${G}/x`], [[`assume:hook-id:${G}/x`]], (c) => c.removeHook(G, 'x'));
await check(Hk, [`hooks:trigger-hook:${G}/${H}`], [[`hooks:trigger-hook:${G}/other`]], (c) => c.triggerHook(G, H, {}));
await check(Hk, [`hooks:get-trigger-token:${G}/${H}`], [[`hooks:reset-trigger-token:${G}/${H}`]], (c) => c.getTriggerToken(G, H));
await check(Hk, [`hooks:reset-trigger-token:${G}/${H}`], [[`hooks:get-trigger-token:${G}/${H}`]], (c) => c.resetTriggerToken(G, H));
await check(Hk, [`hooks:list-last-fires:${G}/fires`], [[`hooks:list-last-fires:${G}/other`]], (c) => c.listLastFires(G, 'fires'));
step('hooks: every method asks for the scope Taskcluster names');

const expires = taskcluster.fromNowJSON('1 hour');
const Ix = taskcluster.Index;
await check(Ix, [`index:insert-task:${run}.a.b`], [[`index:insert-task:${run}.a.c`]],
  (c) => c.insertTask(`${run}.a.b`, { taskId: taskcluster.slugid(), rank: 0, data: {}, expires }));
await check(Ix, [`index:delete-task:${run}.a.b`], [[`index:insert-task:${run}.a.b`]], (c) => c.deleteTask(`${run}.a.b`));
step('index: insertTask and deleteTask ask for index:insert-task and index:delete-task');

const Sc = taskcluster.Secrets;
const name = `${run}/s`;
await check(Sc, [`secrets:set:${name}`], [[`secrets:get:${name}`]], (c) => c.set(name, { secret: { v: 1 }, expires }));
await check(Sc, [`secrets:get:${name}`], [[`secrets:set:${name}`]], (c) => c.get(name));
await check(Sc, ['secrets:list-secrets'], [[`secrets:get:${name}`]], (c) => c.list());
await check(Sc, [`secrets:set:${name}`], [[`secrets:get:${name}`]], (c) => c.remove(name));
step('secrets: set and remove ask for secrets:set, get for secrets:get, list for secrets:list-secrets');

const Ob = taskcluster.Object;
const object = `${run}/o`;
const uploadId = taskcluster.slugid();
await check(Ob, [`object:upload:proj:${object}`], [[`object:upload:other:${object}`]], (c) => c.createUpload(object, {
  projectId: 'proj', uploadId, expires, proposedUploadMethods: { dataInline: { contentType: 'text/plain', objectData: 'aGk=' } },
}));
await check(Ob, [`object:upload:proj:${object}`], [[`object:download:${object}`]], (c) => c.finishUpload(object, { projectId: 'proj', uploadId }));
await check(Ob, [`object:download:${object}`], [[`object:upload:proj:${object}`]], (c) => c.object(object));
await check(Ob, [`object:download:${object}`], [[`object:download:${object}x`]],
  (c) => c.startDownload(object, { acceptDownloadMethods: { simple: true } }));
step('object: uploads ask for object:upload:<projectId>:<name>, downloads for object:download:<name>');

const Pc = taskcluster.PurgeCache;
await check(Pc, [`purge-cache:${run}/w:c`], [[`purge-cache:${run}/w:d`]], (c) => c.purgeCache(`${run}/w`, { cacheName: 'c' }));
await check(Pc, ['purge-cache:all-purge-requests'], [], (c) => c.allPurgeRequests());
await check(Pc, [`purge-cache:purge-requests::${run}/w`], [], (c) => c.purgeRequests(`${run}/w`));
step('purge-cache: purgeCache asks for purge-cache:<workerPoolId>:<cacheName>');

// The monitoring methods the client knows for every service, anonymously.
for (const Cls of [taskcluster.Auth, taskcluster.Hooks, taskcluster.Index, taskcluster.Secrets, taskcluster.Object, taskcluster.PurgeCache]) {
  const c = new Cls({ rootUrl, retries: 0 });
  assert.equal((await c.ping()).alive, true);
  assert.deepEqual(await c.lbheartbeat(), {});
  assert.deepEqual(await c.heartbeat(), {});
  assert.equal((await c.version()).source, 'https://github.com/hopper-ci/hopper');
}
step('every service answers ping, lbheartbeat, heartbeat and version');
