// Authentication and authorization through the official client: root
// manages clients and roles over the Auth API; a worker client claims
// work and, with the claim's temporary credentials, reclaims, creates
// artifacts and reports its run, and is refused everywhere else; disabled
// clients, reset tokens, authorizedScopes, anonymous callers and signed
// URLs behave as on Taskcluster.
import http from 'node:http';
import { taskcluster, assert, queue, taskDef, expectError, step, rootUrl, credentialsFromEnv } from './lib.mjs';

const root = credentialsFromEnv();
const auth = new taskcluster.Auth({ rootUrl, credentials: root, retries: 0 });
const q = queue();
const anonQ = new taskcluster.Queue({ rootUrl, retries: 0 });
const anonAuth = new taskcluster.Auth({ rootUrl, retries: 0 });
const run = Date.now() % 100000;
const tq = `e2e-${run}/auth`;
const otherTq = `e2e-${run}/auth-other`;
const workerGroup = 'e2e-group';
const workerId = 'e2e-auth-worker';
const clientId = 'worker/e2e';
const roleId = `project:e2e-auth-${run}`;
const expires = taskcluster.fromNowJSON('2 hours');

// rawGet fetches a URL without following redirects.
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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

assert.equal((await auth.ping()).alive, true);
step('auth ping');

// ---- root manages a role and a client ------------------------------------------
const role = await auth.createRole(roleId, {
  description: 'what the e2e worker may read',
  scopes: ['queue:get-artifact:private/e2e/*', 'queue:list-artifacts:*'],
});
assert.deepEqual(role.scopes, ['queue:get-artifact:private/e2e/*', 'queue:list-artifacts:*']);
assert.ok(role.expandedScopes.includes(`assume:${roleId}`));
assert.deepEqual((await auth.role(roleId)).scopes, role.scopes);
assert.ok((await auth.listRoles()).some((r) => r.roleId === roleId), 'listRoles is a bare array with the role');
assert.ok((await auth.listRoleIds()).roleIds.includes(roleId));
assert.ok((await auth.listRoles2({ limit: 1 })).continuationToken, 'more than one role: a token');
step('createRole, role, listRoles, listRoleIds, listRoles2');

const clientBody = {
  description: 'e2e worker',
  expires: taskcluster.fromNowJSON('1 day'),
  scopes: [`queue:claim-work:${tq}`, `queue:worker-id:${workerGroup}/${workerId}`, `assume:${roleId}`],
};
const created = await auth.createClient(clientId, clientBody);
assert.match(created.accessToken, /^[A-Za-z0-9_-]{44}$/);
assert.deepEqual(created.scopes, clientBody.scopes);
assert.ok(created.expandedScopes.includes('queue:get-artifact:private/e2e/*'), 'role scopes are expanded');
// A retry of the same request returns the same token; a different one conflicts.
assert.equal((await auth.createClient(clientId, clientBody)).accessToken, created.accessToken);
await expectError(() => auth.createClient(clientId, { ...clientBody, description: 'other' }), 409, 'RequestConflict');
const shown = await auth.client(clientId);
assert.equal(shown.accessToken, undefined, 'getClient never shows the token');
assert.ok((await auth.listClients({ prefix: 'worker/' })).clients.some((c) => c.clientId === clientId));
await expectError(() => auth.createClient('static/mine', clientBody), 400, 'InputError');
step('createClient (with retry and conflict), client, listClients, static ids refused');

let workerCreds = { clientId, accessToken: created.accessToken };
let wq = queue(workerCreds);
const workerAuth = () => new taskcluster.Auth({ rootUrl, credentials: workerCreds, retries: 0 });
const current = await workerAuth().currentScopes();
assert.ok(current.scopes.includes(`queue:claim-work:${tq}`));
assert.ok(current.scopes.includes('queue:get-artifact:private/e2e/*'), 'role scopes apply');
assert.ok(current.scopes.includes('queue:get-task:*'), 'anonymous role applies');
const expanded = await auth.expandScopes({ scopes: [`assume:${roleId}`] });
assert.deepEqual(expanded.scopes, [`assume:${roleId}`, 'queue:get-artifact:private/e2e/*', 'queue:list-artifacts:*']);
step('currentScopes and expandScopes');

// ---- the worker claims, and the claim's credentials do exactly their job -------
await expectError(() => wq.createTask(taskcluster.slugid(), taskDef(tq)), 403, 'InsufficientScopes');
step('the worker client cannot create tasks');

const taskId = taskcluster.slugid();
await q.createTask(taskId, taskDef(tq));
const claimed = await wq.claimWork(tq, { workerGroup, workerId, tasks: 1 });
assert.equal(claimed.tasks.length, 1);
const claim = claimed.tasks[0];
assert.equal(claim.status.taskId, taskId);
assert.match(claim.credentials.clientId, new RegExp(`^task-client/${taskId}/0/on/${workerGroup}/${workerId}/until/`));
let tempQ = queue(claim.credentials);
const reclaim = await tempQ.reclaimTask(taskId, 0);
tempQ = queue(reclaim.credentials);
step('claimWork with the worker client, reclaimTask with the claim credentials');

await tempQ.createArtifact(taskId, 0, 'public/reference', {
  storageType: 'reference', expires, url: 'https://downloads.example.com/out.tar.gz', contentType: 'application/gzip',
});
const data = `private e2e data ${run}`;
const s3 = await tempQ.createArtifact(taskId, 0, 'private/e2e/data.txt', {
  storageType: 's3', expires, contentType: 'text/plain', contentLength: Buffer.byteLength(data),
});
const up = await fetch(s3.putUrl, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: data });
assert.ok(up.ok, `upload: HTTP ${up.status} ${await up.text()}`);
step('createArtifact (reference and s3) with the claim credentials');

const otherTask = taskcluster.slugid();
await q.createTask(otherTask, taskDef(otherTq));
await expectError(() => tempQ.reclaimTask(otherTask, 0), 403, 'InsufficientScopes');
await expectError(() => tempQ.reportCompleted(otherTask, 0), 403, 'InsufficientScopes');
await expectError(() => tempQ.createArtifact(otherTask, 0, 'public/x', { storageType: 'reference', expires, url: 'https://example.com/', contentType: 'text/plain' }), 403, 'InsufficientScopes');
await expectError(() => tempQ.createTask(taskcluster.slugid(), taskDef(tq)), 403, 'InsufficientScopes');
await expectError(() => tempQ.cancelTask(otherTask), 403, 'InsufficientScopes');
await expectError(() => tempQ.claimWork(tq, { workerGroup, workerId, tasks: 1 }), 403, 'InsufficientScopes');
await expectError(() => new taskcluster.Auth({ rootUrl, credentials: reclaim.credentials, retries: 0 }).createClient('worker/evil', clientBody), 403, 'InsufficientScopes');
step('the claim credentials are refused for other tasks, createTask, cancelTask, claimWork and createClient');

const done = await tempQ.reportCompleted(taskId, 0);
assert.equal(done.status.state, 'completed');
step('reportCompleted with the claim credentials');

// ---- reading: anonymous, roles, signed URLs ------------------------------------
assert.equal((await anonQ.status(taskId)).status.state, 'completed');
await expectError(() => anonQ.createTask(taskcluster.slugid(), taskDef(tq)), 403, 'InsufficientScopes');
await expectError(() => anonQ.getLatestArtifact(taskId, 'private/e2e/data.txt'), 403, 'InsufficientScopes');
await expectError(() => anonAuth.createClient('worker/anon', clientBody), 403, 'InsufficientScopes');
step('anonymous callers read statuses but create nothing');

// The worker holds queue:get-artifact:private/e2e/* through the role, so its
// signed URL opens the private artifact for anyone holding the URL.
const signed = wq.buildSignedUrl(wq.getLatestArtifact, taskId, 'private/e2e/data.txt', { expiration: 600 });
const redirect = await rawGet(signed);
assert.equal(redirect.status, 303, `signed getLatestArtifact: HTTP ${redirect.status} ${redirect.body}`);
const body = await (await fetch(redirect.headers.location)).text();
assert.equal(body, data);
const signedTask = q.buildSignedUrl(q.task, taskId, { expiration: 600 });
assert.equal((await rawGet(signedTask)).status, 200);
const shortLived = wq.buildSignedUrl(wq.getLatestArtifact, taskId, 'private/e2e/data.txt', { expiration: 1 });
await sleep(2100);
const expired = await rawGet(shortLived);
assert.equal(expired.status, 401, `expired bewit: HTTP ${expired.status}`);
assert.match(expired.body, /Access expired/);
step('bewit signed URLs work and expire');

// ---- authorizedScopes ----------------------------------------------------------
const narrowRoot = queue(root, { authorizedScopes: ['queue:get-task:*'] });
await narrowRoot.task(taskId);
await expectError(() => narrowRoot.createTask(taskcluster.slugid(), taskDef(tq)), 403, 'InsufficientScopes');
const overreach = queue(workerCreds, { authorizedScopes: [`queue:claim-work:${tq}`, 'queue:create-task:*'] });
await expectError(() => overreach.task(taskId), 401, 'AuthenticationFailed');
step('authorizedScopes restrict (403 beyond them, 401 beyond the client)');

// ---- temporary credentials made by the client library ---------------------------
const temp = taskcluster.createTemporaryCredentials({
  scopes: [`queue:worker-id:${workerGroup}/${workerId}`], expiry: taskcluster.fromNow('1 hour'), credentials: workerCreds,
});
const tempScopes = (await new taskcluster.Auth({ rootUrl, credentials: temp, retries: 0 }).currentScopes()).scopes;
assert.ok(tempScopes.includes(`queue:worker-id:${workerGroup}/${workerId}`));
assert.ok(!tempScopes.includes(`queue:claim-work:${tq}`), 'temporary credentials carry only their scopes');
step('temporary credentials from createTemporaryCredentials');

// ---- disable, enable, reset ------------------------------------------------------
assert.equal((await auth.disableClient(clientId)).disabled, true);
await expectError(() => workerAuth().currentScopes(), 401, 'AuthenticationFailed');
await expectError(() => queue(temp).task(taskId), 401, 'AuthenticationFailed');
assert.equal((await auth.enableClient(clientId)).disabled, false);
await workerAuth().currentScopes();
step('a disabled client (and what it issued) gets 401 until enabled');

const reset = await auth.resetAccessToken(clientId);
assert.notEqual(reset.accessToken, workerCreds.accessToken);
await expectError(() => workerAuth().currentScopes(), 401, 'AuthenticationFailed');
workerCreds = { clientId, accessToken: reset.accessToken };
await workerAuth().currentScopes();
step('resetAccessToken invalidates the old token');

// ---- updates -------------------------------------------------------------------
const updated = await auth.updateClient(clientId, { ...clientBody, description: 'e2e worker v2' });
assert.equal(updated.description, 'e2e worker v2');
const updatedRole = await auth.updateRole(roleId, { description: 'v2', scopes: ['queue:get-artifact:private/e2e/*'] });
assert.deepEqual(updatedRole.scopes, ['queue:get-artifact:private/e2e/*']);
await expectError(() => auth.createRole(`${roleId}-loop`, { description: 'loop', scopes: [`assume:${roleId}-loop`] }), 400, 'InputError');
step('updateClient, updateRole, cyclic roles refused');

// ---- test endpoints ----------------------------------------------------------------
const tester = new taskcluster.Auth({ rootUrl, credentials: { clientId: 'tester', accessToken: 'no-secret' }, retries: 0 });
assert.deepEqual(await tester.testAuthenticate({ clientScopes: ['test:a'], requiredScopes: ['test:a'] }),
  { clientId: 'tester', scopes: ['assume:anonymous', 'test:a'] });
await expectError(() => tester.testAuthenticate({ clientScopes: ['test:a'], requiredScopes: ['test:b'] }), 403, 'InsufficientScopes');
assert.equal((await tester.testAuthenticateGet()).clientId, 'tester');
step('testAuthenticate and testAuthenticateGet');

// ---- audit history of an existing client (once answered "Client not found") -----
assert.deepEqual(await auth.listAuditHistory(clientId), { auditHistory: [] }, 'the worker client changed nothing');

// ---- cleanup: deletes succeed even twice ---------------------------------------------
await auth.deleteClient(clientId);
await auth.deleteClient(clientId);
await expectError(() => auth.client(clientId), 404, 'ResourceNotFound');
await expectError(() => workerAuth().currentScopes(), 401, 'AuthenticationFailed');
await auth.deleteRole(roleId);
await auth.deleteRole(roleId);
await expectError(() => auth.role(roleId), 404, 'ResourceNotFound');
step('deleteClient and deleteRole');

// ---- audit history: who changed which client or role, and when --------------------
const clientHistory = (await auth.getEntityHistory('client', clientId)).auditHistory;
assert.deepEqual(clientHistory.map((e) => e.actionType),
  ['created', 'client disabled', 'client enabled', 'access token reset', 'updated', 'deleted'],
  'one entry per change: not for the retried create, the refused one or the second delete');
for (const e of clientHistory) {
  assert.deepEqual(Object.keys(e).sort(), ['actionType', 'clientId', 'created', 'entityId', 'entityType']);
  assert.equal(e.clientId, root.clientId);
  assert.equal(e.entityType, 'client');
  assert.equal(e.entityId, clientId);
  assert.ok(Date.now() - Date.parse(e.created) < 10 * 60e3, `created is a recent date-time: ${e.created}`);
}
const roleHistory = (await auth.getEntityHistory('role', roleId)).auditHistory;
assert.deepEqual(roleHistory.map((e) => e.actionType), ['created', 'updated', 'deleted']);
let byRoot = [];
let page = { limit: 4 };
for (;;) {
  const res = await auth.listAuditHistory(root.clientId, page);
  byRoot = byRoot.concat(res.auditHistory);
  if (!res.continuationToken) break;
  page = { limit: 4, continuationToken: res.continuationToken };
}
assert.equal(byRoot.length, clientHistory.length + roleHistory.length, 'root made every change, listed in pages of four');
assert.deepEqual(byRoot.filter((e) => e.entityType === 'role'), roleHistory);
await expectError(() => auth.getEntityHistory('secret', 'any'), 400, 'InputError');
await expectError(() => auth.getEntityHistory('table', 'any'), 400, 'InvalidRequestArguments');
await expectError(() => anonAuth.listAuditHistory(root.clientId), 403, 'InsufficientScopes');
await expectError(() => anonAuth.getEntityHistory('client', clientId), 403, 'InsufficientScopes');
step('listAuditHistory and getEntityHistory');
