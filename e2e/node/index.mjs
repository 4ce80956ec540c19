// The Index service through the official client: tasks completed with
// index.<path> routes are found at once (rank and expiry from
// extra.index), namespaces and entries are listed page by page, entries
// are inserted and deleted with the index:* scopes, findArtifactFromTask
// redirects as getLatestArtifact does (anonymously for public/ names),
// expired entries are gone and bad input gets Taskcluster's error bodies.
import http from 'node:http';
import { taskcluster, assert, queue, taskDef, expectError, step, rootUrl, credentialsFromEnv } from './lib.mjs';

const root = credentialsFromEnv();
const q = queue();
const index = new taskcluster.Index({ rootUrl, credentials: root, retries: 0 });
const anonIndex = new taskcluster.Index({ rootUrl, retries: 0 });
const auth = new taskcluster.Auth({ rootUrl, credentials: root, retries: 0 });
const run = `e2e${Date.now() % 1000000}`;
const tq = `${run}/index`;
const worker = { workerGroup: 'e2e-group', workerId: 'e2e-index' };
const expires = taskcluster.fromNowJSON('2 hours');

function rawGet(url) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

assert.equal((await index.ping()).alive, true);
await index.lbheartbeat();
await index.heartbeat();
assert.ok((await index.version()).version);
step('index ping, heartbeats, version');

// ---- tasks indexed through their routes on completion -----------------------
// completeTask creates a task with the routes and extra, claims it, gives
// it a public and a private reference artifact and reports it completed.
async function completeTask(routes, extra = {}) {
  const taskId = taskcluster.slugid();
  await q.createTask(taskId, taskDef(tq, { routes, extra, expires: taskcluster.fromNowJSON('1 day') }));
  const res = await q.claimWork(tq, { ...worker, tasks: 1 });
  assert.equal(res.tasks.length, 1, 'claimWork returned no task');
  const cq = queue(res.tasks[0].credentials);
  for (const name of ['public/build.txt', 'private/build.txt']) {
    await cq.createArtifact(taskId, 0, name, { storageType: 'reference', expires, url: `https://example.com/${taskId}/${name}`, contentType: 'text/plain' });
  }
  await cq.reportCompleted(taskId, 0);
  return taskId;
}

const ns = `${run}.app`;
const t1 = await completeTask([`index.${ns}.latest`, `index.${ns}.rev1`], { index: { rank: 10, data: { rev: 1 } } });
let found = await index.findTask(`${ns}.latest`);
assert.equal(found.taskId, t1, 'indexed as soon as reportCompleted returned');
assert.equal(found.namespace, `${ns}.latest`);
assert.equal(found.rank, 10);
assert.deepEqual(found.data, { rev: 1 });
const t2 = await completeTask([`index.${ns}.latest`, `index.${ns}.rev2`], { index: { rank: 9 } });
assert.equal((await index.findTask(`${ns}.latest`)).taskId, t1, 'a lower rank does not replace');
assert.equal((await index.findTask(`${ns}.rev2`)).taskId, t2);
const entryExpires = taskcluster.fromNowJSON('3 hours');
const t3 = await completeTask([`index.${ns}.latest`, `index.${ns}.rev3`], { index: { rank: 10, expires: entryExpires } });
found = await index.findTask(`${ns}.latest`);
assert.equal(found.taskId, t3, 'an equal rank replaces');
assert.equal(new Date(found.expires).getTime(), new Date(entryExpires).getTime(), 'expires from extra.index.expires');
assert.deepEqual(found.data, {});
// A failed task is not indexed.
const failed = taskcluster.slugid();
await q.createTask(failed, taskDef(tq, { routes: [`index.${ns}.failed`] }));
await q.claimWork(tq, { ...worker, tasks: 1 });
await q.reportFailed(failed, 0);
await expectError(() => index.findTask(`${ns}.failed`), 404, 'ResourceNotFound');
// hopper's own indexedAt: where each task is found now.
const at = async (taskId) => JSON.parse((await rawGet(`${rootUrl}/api/index/v1/indexed-at/${taskId}`)).body);
assert.deepEqual((await at(t1)).tasks.map((e) => e.namespace), [`${ns}.rev1`], 'rank 10 lost latest to an equal rank');
assert.deepEqual((await at(t3)).tasks.map((e) => e.namespace), [`${ns}.latest`, `${ns}.rev3`]);
assert.deepEqual((await at(failed)).tasks, []);
step('findTask: completed tasks indexed at their routes with rank, data and expires');

// ---- listing with continuation tokens ----------------------------------------
const roots = await anonIndex.listNamespaces('');
assert.ok(roots.namespaces.some((n) => n.namespace === run && n.name === run), 'the run namespace at the root');
const sub = await index.listNamespaces(run);
assert.deepEqual(sub.namespaces.map((n) => [n.namespace, n.name]), [[ns, 'app']]);
assert.ok(new Date(sub.namespaces[0].expires) > new Date());
const names = [];
let token;
let pages = 0;
do {
  const page = await anonIndex.listTasks(ns, { limit: 2, ...(token ? { continuationToken: token } : {}) });
  assert.ok(page.tasks.length <= 2);
  names.push(...page.tasks.map((t) => t.namespace));
  token = page.continuationToken;
  pages++;
} while (token);
assert.deepEqual(names, [`${ns}.latest`, `${ns}.rev1`, `${ns}.rev2`, `${ns}.rev3`]);
assert.equal(pages, 2);
for (let i = 0; i < 3; i++) {
  await index.insertTask(`${run}.many.n${i}.x`, { taskId: t1, rank: 0, data: {}, expires });
}
const nsPage = await index.listNamespaces(`${run}.many`, { limit: 2 });
assert.deepEqual(nsPage.namespaces.map((n) => n.name), ['n0', 'n1']);
const nsRest = await index.listNamespaces(`${run}.many`, { limit: 2, continuationToken: nsPage.continuationToken });
assert.deepEqual(nsRest.namespaces.map((n) => n.name), ['n2']);
assert.equal(nsRest.continuationToken, undefined);
const atIndex = await index.findTasksAtIndex({ indexes: [`${ns}.rev2`, `${ns}.nothing`, `${ns}.rev1`, `${ns}.latest`] }, { limit: 2 });
assert.deepEqual(atIndex.tasks.map((t) => t.taskId), [t2, t1]);
const atIndexRest = await index.findTasksAtIndex({ indexes: [`${ns}.rev2`, `${ns}.nothing`, `${ns}.rev1`, `${ns}.latest`] },
  { limit: 2, continuationToken: atIndex.continuationToken });
assert.deepEqual(atIndexRest.tasks.map((t) => t.taskId), [t3]);
assert.equal(atIndexRest.continuationToken, undefined);
step('listNamespaces, listTasks and findTasksAtIndex page with continuation tokens');

// ---- insertTask, deleteTask and their scopes --------------------------------
const otherTask = taskcluster.slugid();
let ins = await index.insertTask(`${ns}.latest`, { taskId: otherTask, rank: 1, data: { k: 'v' }, expires });
assert.equal(ins.taskId, t3, 'a lower rank answers the entry kept');
ins = await index.insertTask(`${ns}.latest`, { taskId: otherTask, rank: 11, data: { k: 'v' }, expires });
assert.equal(ins.taskId, otherTask);
assert.deepEqual(ins.data, { k: 'v' });
assert.equal((await index.findTask(`${ns}.latest`)).taskId, otherTask);
assert.deepEqual(await index.deleteTask(`${ns}.latest`), {});
await expectError(() => index.findTask(`${ns}.latest`), 404, 'ResourceNotFound');

const clientId = `${run}/indexer`;
const { accessToken } = await auth.createClient(clientId, {
  description: 'may insert below allowed', expires: taskcluster.fromNowJSON('1 hour'),
  scopes: [`index:insert-task:${run}.allowed.*`, `index:delete-task:${run}.allowed.*`, 'queue:create-task:*', 'queue:scheduler-id:*',
    `queue:create-task:project:none`],
});
const limited = new taskcluster.Index({ rootUrl, credentials: { clientId, accessToken }, retries: 0 });
await limited.insertTask(`${run}.allowed.x`, { taskId: otherTask, rank: 0, data: {}, expires });
await limited.deleteTask(`${run}.allowed.x`);
let err = await expectError(() => limited.insertTask(`${run}.other.x`, { taskId: otherTask, rank: 0, data: {}, expires }), 403, 'InsufficientScopes');
assert.match(err.message, new RegExp(`index:insert-task:${run}\\.other\\.x`));
await expectError(() => limited.deleteTask(`${ns}.rev1`), 403, 'InsufficientScopes');
await expectError(() => anonIndex.insertTask(`${run}.allowed.y`, { taskId: otherTask, rank: 0, data: {}, expires }), 403, 'InsufficientScopes');
// Routing a task to the index needs queue:route:index.<path> at createTask.
const limitedQueue = queue({ clientId, accessToken });
err = await expectError(() => limitedQueue.createTask(taskcluster.slugid(), taskDef(tq, { routes: [`index.${run}.sneaky`] })), 403, 'InsufficientScopes');
assert.match(err.message, /queue:route:index\./);
step('insertTask keeps the higher rank; deleteTask; index:insert-task, index:delete-task and queue:route:index.* enforced');

// ---- findArtifactFromTask ---------------------------------------------------------
const loc = await anonIndex.findArtifactFromTask(`${ns}.rev1`, 'public/build.txt');
assert.equal(loc.url, `https://example.com/${t1}/public/build.txt`, 'anonymous callers reach public/ artifacts');
await expectError(() => anonIndex.findArtifactFromTask(`${ns}.rev1`, 'private/build.txt'), 403, 'InsufficientScopes');
assert.equal((await index.findArtifactFromTask(`${ns}.rev1`, 'private/build.txt')).url, `https://example.com/${t1}/private/build.txt`);
await expectError(() => index.findArtifactFromTask(`${ns}.rev1`, 'public/none.txt'), 404, 'ResourceNotFound');
await expectError(() => index.findArtifactFromTask(`${ns}.nothing`, 'public/build.txt'), 404, 'ResourceNotFound');
const signed = index.buildSignedUrl(index.findArtifactFromTask, `${ns}.rev2`, 'private/build.txt', { expiration: 600 });
const redirect = await rawGet(signed);
assert.equal(redirect.status, 303, `signed findArtifactFromTask: HTTP ${redirect.status} ${redirect.body}`);
assert.equal(redirect.headers.location, `https://example.com/${t2}/private/build.txt`);
const anonRedirect = await rawGet(index.buildUrl(index.findArtifactFromTask, `${ns}.rev2`, 'public/build.txt'));
assert.equal(anonRedirect.status, 303);
assert.equal(anonRedirect.headers.location, `https://example.com/${t2}/public/build.txt`);
step('findArtifactFromTask redirects like getLatestArtifact (anonymous for public/, signed URLs)');

// ---- expiry -------------------------------------------------------------------------
const past = new Date(Date.now() - 60 * 1000).toJSON();
await index.insertTask(`${run}.expired.entry`, { taskId: otherTask, rank: 0, data: {}, expires: past });
await expectError(() => index.findTask(`${run}.expired.entry`), 404, 'ResourceNotFound');
assert.deepEqual((await index.listTasks(`${run}.expired`)).tasks, []);
assert.deepEqual((await index.findTasksAtIndex({ indexes: [`${run}.expired.entry`] })).tasks, []);
// An expired entry, whatever its rank, gives way to the next insert: it can
// no longer be found, so it must not swallow later inserts of lower rank.
const kept = await index.insertTask(`${run}.ranked.one`, { taskId: taskcluster.slugid(), rank: 41, data: {}, expires });
await index.insertTask(`${run}.ranked.three`, { taskId: otherTask, rank: 44, data: {}, expires: past });
const successor = await index.insertTask(`${run}.ranked.three`, { taskId: taskcluster.slugid(), rank: 43, data: { n: 3 }, expires });
assert.equal(successor.rank, 43, 'an expired entry of higher rank is replaced');
assert.deepEqual(await index.findTasksAtIndex({ indexes: [`${run}.ranked.one`, `${run}.ranked.three`] }), { tasks: [kept, successor] });
step('expired entries are not found, and give way to any rank');

// ---- bad input ----------------------------------------------------------------------
err = await expectError(() => index.insertTask(`${run}.bad`, { taskId: otherTask, data: {}, expires }), 400, 'InputValidationError');
assert.equal(err.body.requestInfo.method, 'insertTask');
assert.match(err.message, /data must have required property 'rank'/, "ajv's wording, as Taskcluster answers");
await expectError(() => index.insertTask(`${run}.bad`, { taskId: 'not-a-slug', rank: 0, data: {}, expires }), 400, 'InputValidationError');
await expectError(() => index.insertTask(`${run}.bad`, { taskId: otherTask, rank: 'high', data: {}, expires }), 400, 'InputValidationError');
err = await expectError(() => index.findTask(`${run}..double-dot`), 400, 'InvalidRequestArguments');
assert.match(err.message, /URL parameter 'indexPath' given as '.*' must match regular expression/, 'worded as Taskcluster words it');
err = await expectError(() => index.listTasks(ns, { limit: 'many' }), 400, 'InvalidRequestArguments');
assert.match(err.message, /Query-string parameter: limit="many" does not match expression/);
await expectError(() => index.listTasks(`${run}.`), 400, 'InvalidRequestArguments');
await expectError(() => index.listTasks(ns, { continuationToken: '!!' }), 400, 'InputError');
await expectError(() => index.findTasksAtIndex({ indexes: 'x' }), 400, 'InputValidationError');
step('bad input answers Taskcluster error bodies');
