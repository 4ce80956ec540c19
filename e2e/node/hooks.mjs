// The Hooks service through the official client: every method of
// taskcluster-client's Hooks, the JSON-e task template with each kind of
// fire, the hook's role as the created task's scopes, trigger tokens, the
// record of fires, and Taskcluster's error bodies for bad definitions and
// bad payloads (which create nothing).
import { taskcluster, assert, queue, expectError, step, rootUrl, credentialsFromEnv } from './lib.mjs';

const root = credentialsFromEnv();
const hooks = new taskcluster.Hooks({ rootUrl, credentials: root, retries: 0 });
const auth = new taskcluster.Auth({ rootUrl, credentials: root, retries: 0 });
const q = queue();
const run = Date.now() % 100000;
const group = `e2e-hooks-${run}`;
const tq = `e2e-${run}/hooks`;

assert.equal((await hooks.ping()).alive, true);
await hooks.lbheartbeat();
await hooks.heartbeat();
assert.equal(typeof (await hooks.version()).version, 'string');
step('ping, heartbeats, version');

// The hooks of the group may create tasks on the test's task queue.
await auth.createRole(`hook-id:${group}/*`, {
  description: 'e2e hooks',
  scopes: [`queue:create-task:lowest:${tq}`, 'queue:create-task:project:none', 'queue:scheduler-id:-', 'queue:route:index.e2e.*'],
});

const template = {
  taskQueueId: tq,
  created: { $fromNow: '0 seconds' },
  deadline: { $fromNow: '1 hour' },
  expires: { $fromNow: '2 days' },
  routes: ['index.e2e.${firedBy}'],
  payload: { command: [['echo', { $eval: 'payload.version' }]], maxRunTime: 60 },
  metadata: {
    name: 'build ${payload.version}',
    description: 'fired by ${firedBy}',
    owner: 'e2e@example.com',
    source: 'https://example.com/e2e',
  },
  extra: { clientId: { $if: 'firedBy == "triggerHook"', then: { $eval: 'clientId' }, else: 'none' } },
};
const definition = {
  metadata: { name: 'nightly', description: 'e2e hook', owner: 'e2e@example.com' },
  schedule: ['0 0 0 1 1 *'],
  task: template,
  triggerSchema: {
    type: 'object',
    properties: { version: { type: 'string' }, taskId: { type: 'string' } },
    required: ['version'],
    additionalProperties: false,
  },
};

const created = await hooks.createHook(group, 'nightly/build', definition);
assert.equal(created.hookGroupId, group);
assert.equal(created.hookId, 'nightly/build');
assert.deepEqual(created.bindings, []);
assert.equal(created.metadata.emailOnError, true, 'schema defaults are filled');
await hooks.createHook(group, 'nightly/build', definition);
step('createHook, and an identical repeat succeeds');

await expectError(() => hooks.createHook(group, 'nightly/build', { ...definition, schedule: ['0 0 0 * * *'] }), 409, 'RequestConflict');
step('createHook with another definition conflicts');

assert.ok((await hooks.listHookGroups()).groups.includes(group));
const listed = await hooks.listHooks(group);
assert.deepEqual(listed.hooks.map((h) => h.hookId), ['nightly/build']);
const got = await hooks.hook(group, 'nightly/build');
assert.deepEqual(got.task, template);
assert.deepEqual(got.schedule, ['0 0 0 1 1 *']);
await expectError(() => hooks.listHooks(`${group}-none`), 404, 'ResourceNotFound');
await expectError(() => hooks.hook(group, 'missing'), 404, 'ResourceNotFound');
step('listHookGroups, listHooks, hook');

let status = await hooks.getHookStatus(group, 'nightly/build');
assert.deepEqual(status.lastFire, { result: 'no-fire' });
assert.match(status.nextScheduledDate, /^\d{4}-01-01T00:00:00\.000Z$/);
step('getHookStatus before any fire');

const fired = await hooks.triggerHook(group, 'nightly/build', { version: '1.2.3' });
assert.ok(fired.taskId);
assert.equal(fired.status.taskId, fired.taskId);
const task = await q.task(fired.taskId);
assert.equal(task.metadata.name, 'build 1.2.3');
assert.equal(task.metadata.description, 'fired by triggerHook');
assert.deepEqual(task.payload.command, [['echo', '1.2.3']]);
assert.equal(task.taskGroupId, fired.taskId, 'taskGroupId defaults to the taskId');
assert.equal(task.extra.clientId, root.clientId, 'the context has the caller');
assert.deepEqual(task.routes, ['index.e2e.triggerHook']);
step('triggerHook renders the template and creates the task');

const chosen = taskcluster.slugid();
const withId = await hooks.triggerHook(group, 'nightly/build', { version: '2', taskId: chosen });
assert.equal(withId.taskId, chosen);
await q.status(chosen);
step('triggerHook with the taskId the payload chose');

const before = (await hooks.listLastFires(group, 'nightly/build')).lastFires.length;
let err = await expectError(() => hooks.triggerHook(group, 'nightly/build', { nope: true }), 400, 'InputError');
assert.match(err.message, /version/);
await expectError(() => hooks.triggerHook(group, 'nightly/build', { version: '1', taskId: 'not-a-slug' }), 400, 'InputError');
const refused = (await hooks.listLastFires(group, 'nightly/build')).lastFires;
assert.equal(refused.length, before + 2, 'a refused payload is recorded as a failed fire');
for (const f of refused.slice(0, 2)) {
  assert.equal(f.result, 'error');
  assert.equal(f.firedBy, 'triggerHook');
  assert.equal(f.taskState, 'unknown', 'no task was created');
}
assert.match(refused[1].error, /version/);
step('bad trigger payloads get InputError, create nothing and are recorded as failed fires');

const { token } = await hooks.getTriggerToken(group, 'nightly/build');
assert.equal((await hooks.getTriggerToken(group, 'nightly/build')).token, token);
const webhook = await hooks.triggerHookWithToken(group, 'nightly/build', token, { version: 'web' });
const webTask = await q.task(webhook.taskId);
assert.equal(webTask.metadata.description, 'fired by triggerHookWithToken');
assert.equal(webTask.extra.clientId, 'none', 'a webhook has no clientId');
await expectError(() => hooks.triggerHookWithToken(group, 'nightly/build', 'wrong-token', { version: 'x' }), 401, 'AuthenticationFailed');
const reset = await hooks.resetTriggerToken(group, 'nightly/build');
assert.notEqual(reset.token, token);
await expectError(() => hooks.triggerHookWithToken(group, 'nightly/build', token, { version: 'x' }), 401, 'AuthenticationFailed');
await hooks.triggerHookWithToken(group, 'nightly/build', reset.token, { version: 'again' });
step('getTriggerToken, triggerHookWithToken, resetTriggerToken');
console.log(`tokens used: ${token} ${reset.token}`);

const allFires = (await hooks.listLastFires(group, 'nightly/build')).lastFires;
assert.equal(allFires.length, 6);
assert.deepEqual(allFires.map((f) => `${f.firedBy} ${f.result}`), ['triggerHookWithToken success', 'triggerHookWithToken success',
  'triggerHook error', 'triggerHook error', 'triggerHook success', 'triggerHook success']);
const fires = allFires.filter((f) => f.result === 'success');
for (const f of fires) {
  assert.equal(f.taskState, 'pending');
  assert.equal(f.hookGroupId, group);
}
assert.equal(fires[2].taskId, chosen);
const page = await hooks.listLastFires(group, 'nightly/build', { limit: 4 });
assert.equal(page.lastFires.length, 4);
const rest = await hooks.listLastFires(group, 'nightly/build', { limit: 4, continuationToken: page.continuationToken });
assert.equal(rest.lastFires.length, 2);
status = await hooks.getHookStatus(group, 'nightly/build');
assert.equal(status.lastFire.result, 'success');
assert.equal(status.lastFire.taskId, fires[0].taskId);
step('listLastFires (newest first, paged) and getHookStatus after fires');

// A template that renders to null declines: no task, nothing recorded.
await hooks.createHook(group, 'maybe', { ...definition, schedule: [], task: { $if: 'payload.version == "go"', then: template } });
assert.deepEqual(await hooks.triggerHook(group, 'maybe', { version: 'stop' }), {});
assert.deepEqual((await hooks.listLastFires(group, 'maybe')).lastFires, [], 'a hook that never fired has no fires');
await expectError(() => hooks.listLastFires(group, 'no-such-hook'), 404, 'ResourceNotFound');
assert.ok((await hooks.triggerHook(group, 'maybe', { version: 'go' })).taskId);
step('a template rendering to null creates nothing');

// A template that fails to render: InputError, a failed fire, no task.
await hooks.createHook(group, 'broken', { ...definition, schedule: [], task: { ...template, payload: { $eval: 'missing.thing' } } });
err = await expectError(() => hooks.triggerHook(group, 'broken', { version: '1' }), 400, 'InputError');
assert.match(err.message, /While firing hook/);
let brokenFires = (await hooks.listLastFires(group, 'broken')).lastFires;
assert.equal(brokenFires.length, 1);
assert.equal(brokenFires[0].result, 'error');
assert.equal(brokenFires[0].taskState, 'unknown');
await expectError(() => q.task(brokenFires[0].taskId), 404, 'ResourceNotFound');
status = await hooks.getHookStatus(group, 'broken');
assert.equal(status.lastFire.result, 'error');
assert.equal(typeof status.lastFire.error.message, 'string');
assert.equal(status.nextScheduledDate, undefined, 'no schedule, no next date');
step('a bad template is a failed fire and creates nothing');

// The task is created with the hook's role only: a route the role lacks
// is refused with the role named.
await hooks.createHook(group, 'overreach', { ...definition, schedule: [], task: { ...template, routes: ['notify.email.x'] } });
err = await expectError(() => hooks.triggerHook(group, 'overreach', { version: '1' }), 403, 'InsufficientScopes');
assert.match(err.message, new RegExp(`hook-id:${group}/overreach`));
assert.equal(err.body.details.createTask.method, 'createTask');
brokenFires = (await hooks.listLastFires(group, 'overreach')).lastFires;
assert.equal(brokenFires[0].result, 'error');
assert.equal(JSON.parse(brokenFires[0].error).code, 'InsufficientScopes');
step("the created task gets the scopes of the hook's role, no more");

// Bad definitions: Taskcluster's error bodies, nothing stored.
err = await expectError(() => hooks.createHook(group, 'bad-schedule', { ...definition, schedule: ['61 * * * *'] }), 400, 'InputError');
assert.match(err.message, /Constraint error, got value 61 expected range 0-59 in 61 \* \* \* \*/);
err = await expectError(() => hooks.createHook(group, 'bad-schema', { ...definition, triggerSchema: { type: 'nonsense' } }), 400, 'InputError');
assert.match(err.message, /triggerSchema is not a valid JSON schema/);
err = await expectError(() => hooks.createHook(group, 'bound', { ...definition, bindings: [{ exchange: 'exchange/x', routingKeyPattern: '#' }] }), 400, 'InputError');
assert.match(err.message, /AMQP/);
await expectError(() => hooks.createHook(group, 'no-task', { metadata: definition.metadata }), 400, 'InputValidationError');
await expectError(() => hooks.createHook(group, 'ids', { ...definition, hookId: 'other' }), 400, 'InputError');
// Ids outside the URL patterns, worded as Taskcluster words them (its own
// tests match /hookGroupId.*must match/).
err = await expectError(() => hooks.createHook('foo/slash', 'x', definition), 400, 'InvalidRequestArguments');
assert.match(err.message, /hookGroupId.*must match/);
err = await expectError(() => hooks.createHook(group, 'bar!!!', definition), 400, 'InvalidRequestArguments');
assert.match(err.message, /hookId.*must match/);
// Bodies that fail the schema also carry ajv's sentences, as Taskcluster's do.
err = await expectError(() => hooks.createHook(group, 'b1', { ...definition, bindings: [{ exchange: 'exchange/x' }] }), 400, 'InputValidationError');
assert.match(err.message, /must have required property 'routingKeyPattern'/);
err = await expectError(() => hooks.createHook(group, 'b2', { ...definition, bindings: { exchange: 'exchange/x', routingKeyPattern: '#' } }), 400, 'InputValidationError');
assert.match(err.message, /must be array/);
for (const id of ['bad-schedule', 'bad-schema', 'bound', 'no-task', 'ids']) {
  await expectError(() => hooks.hook(group, id), 404, 'ResourceNotFound');
}
step('bad schedules, trigger schemas, bindings and bodies are refused and store nothing');

const updated = await hooks.updateHook(group, 'nightly/build', { ...definition, schedule: ['0 0 12 * * 1-5', '0 0 12 * * 1'] });
assert.deepEqual(updated.schedule, ['0 0 12 * * 1-5', '0 0 12 * * 1']);
assert.deepEqual((await hooks.hook(group, 'nightly/build')).schedule, updated.schedule);
status = await hooks.getHookStatus(group, 'nightly/build');
assert.match(status.nextScheduledDate, /T12:00:00\.000Z$/);
await expectError(() => hooks.updateHook(group, 'missing', definition), 404, 'ResourceNotFound');
await expectError(() => hooks.updateHook(group, 'nightly/build', { ...definition, schedule: ['nope'] }), 400, 'InputError');
step('updateHook');

// Scopes: a caller limited to listing cannot change or trigger hooks.
const lister = new taskcluster.Hooks({ rootUrl, credentials: root, retries: 0, authorizedScopes: [`hooks:list-hooks:${group}`] });
await lister.listHooks(group);
await expectError(() => lister.createHook(group, 'x', definition), 403, 'InsufficientScopes');
await expectError(() => lister.triggerHook(group, 'nightly/build', { version: '1' }), 403, 'InsufficientScopes');
await expectError(() => lister.getTriggerToken(group, 'nightly/build'), 403, 'InsufficientScopes');
await expectError(() => lister.resetTriggerToken(group, 'nightly/build'), 403, 'InsufficientScopes');
await expectError(() => lister.removeHook(group, 'nightly/build'), 403, 'InsufficientScopes');
// Creating a hook needs its role too (assume:hook-id:…).
const modifier = new taskcluster.Hooks({ rootUrl, credentials: root, retries: 0, authorizedScopes: [`hooks:modify-hook:${group}/*`] });
await expectError(() => modifier.createHook(group, 'x', definition), 403, 'InsufficientScopes');
step('hooks scopes are enforced');

await hooks.removeHook(group, 'nightly/build');
await expectError(() => hooks.hook(group, 'nightly/build'), 404, 'ResourceNotFound');
await expectError(() => hooks.listLastFires(group, 'nightly/build'), 404, 'ResourceNotFound');
await hooks.removeHook(group, 'nightly/build');
step('removeHook');
