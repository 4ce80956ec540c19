// The Notify service through the official client: every method of its
// reference (email, pulse, matrix, slack, the denylist, ping and
// heartbeats) with the notify:* scopes, and a task's notify.* routes (with
// the queue:route:notify.* scopes createTask asks for) producing
// notifications whose delivery hopper's own listing reports. The Go test
// that runs this (internal/e2e/notify_test.go) checks what the SMTP
// server, the webhook receiver and the broker received.
import http from 'node:http';
import { taskcluster, assert, queue, taskDef, expectError, step, rootUrl, credentialsFromEnv } from './lib.mjs';

const root = credentialsFromEnv();
const q = queue();
const notify = new taskcluster.Notify({ rootUrl, credentials: root, retries: 0 });
const anon = new taskcluster.Notify({ rootUrl, retries: 0 });
const auth = new taskcluster.Auth({ rootUrl, credentials: root, retries: 0 });
const run = process.env.E2E_RUN || `e2e${Date.now() % 1000000}`;
const tq = `${run}/notify`;
const worker = { workerGroup: 'e2e-group', workerId: 'e2e-notify' };

function rawGet(url) {
  return new Promise((resolve, reject) => {
    http.get(url, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    }).on('error', reject);
  });
}

assert.equal((await notify.ping()).alive, true);
await notify.lbheartbeat();
await notify.heartbeat();
assert.ok((await notify.version()).version);
step('notify ping, heartbeats, version');

// ---- email ----------------------------------------------------------------------
const mail = { address: `api-${run}@example.com`, subject: `API mail ${run}`, content: 'Hello **there**', link: { text: 'Home', href: 'https://example.com/' } };
await notify.email(mail);
await notify.email(mail); // the same again: a duplicate, answered 204 and not sent
await expectError(() => notify.email({ ...mail, address: 'not an address' }), 400, 'InputValidationError');
await expectError(() => notify.email({ address: mail.address, subject: 'x' }), 400, 'InputValidationError');
await expectError(() => notify.email({ ...mail, content: 'x'.repeat(102401) }), 400, 'InputValidationError');
await expectError(() => anon.email(mail), 403, 'InsufficientScopes');
step('email: stored and answered; bad input and no scopes refused');

async function client(id, scopes) {
  const clientId = `${run}/${id}`;
  const { accessToken } = await auth.createClient(clientId, { description: id, expires: taskcluster.fromNowJSON('1 hour'), scopes });
  return { clientId, accessToken };
}
const mailer = new taskcluster.Notify({ rootUrl, credentials: await client('mailer', [`notify:email:${mail.address}`]), retries: 0 });
await mailer.email({ ...mail, subject: `scoped ${run}` });
await expectError(() => mailer.email({ ...mail, address: 'x@example.org' }), 403, 'InsufficientScopes');
await expectError(() => mailer.slack({ channelId: 'C0123', text: 'x' }), 403, 'InsufficientScopes');
step('notify:email:<address> enforced');

// ---- the denylist -------------------------------------------------------------
const denied = { notificationType: 'email', notificationAddress: `denied-${run}@example.com` };
await notify.addDenylistAddress(denied);
await notify.addDenylistAddress(denied); // twice is fine
await notify.addDenylistAddress({ notificationType: 'slack-channel', notificationAddress: 'CDENIED1' });
await notify.addDenylistAddress({ notificationType: 'matrix-room', notificationAddress: `!denied${run}:example.org` });
await notify.addDenylistAddress({ notificationType: 'pulse', notificationAddress: `denied.${run}` });
let err = await expectError(() => notify.email({ ...mail, address: denied.notificationAddress }), 400, 'DenylistedAddress');
assert.match(err.message, /denylisted/);
// Mail systems deliver DENIED-… and Denied-…@Example.COM to the same box.
await expectError(() => notify.email({ ...mail, address: denied.notificationAddress.toUpperCase() }), 400, 'DenylistedAddress');
await expectError(() => notify.email({ ...mail, address: `Denied-${run}@Example.COM` }), 400, 'DenylistedAddress');
await expectError(() => notify.slack({ channelId: 'CDENIED1', text: 'x' }), 400, 'DenylistedAddress');
await expectError(() => notify.matrix({ roomId: `!denied${run}:example.org`, body: 'x' }), 400, 'DenylistedAddress');
await expectError(() => notify.pulse({ routingKey: `denied.${run}`, message: {} }), 400, 'DenylistedAddress');
await expectError(() => notify.addDenylistAddress({ notificationType: 'fax', notificationAddress: 'x' }), 400, 'InputValidationError');
const manager = new taskcluster.Notify({ rootUrl, credentials: await client('mailer-only', ['notify:email:*']), retries: 0 });
await expectError(() => manager.addDenylistAddress(denied), 403, 'InsufficientScopes');
await expectError(() => manager.listDenylist(), 403, 'InsufficientScopes');
const listed = [];
let token;
do {
  const page = await notify.listDenylist({ limit: 2, ...(token ? { continuationToken: token } : {}) });
  assert.ok(page.addresses.length <= 2);
  listed.push(...page.addresses);
  token = page.continuationToken;
} while (token);
assert.ok(listed.some((a) => a.notificationType === 'email' && a.notificationAddress === denied.notificationAddress));
assert.equal(listed.filter((a) => a.notificationAddress === denied.notificationAddress).length, 1, 'added twice, listed once');
await notify.deleteDenylistAddress(denied);
await notify.deleteDenylistAddress(denied); // deleting a missing address is fine
assert.ok(!(await notify.listDenylist()).addresses.some((a) => a.notificationAddress === denied.notificationAddress));
await notify.email({ ...mail, address: denied.notificationAddress, subject: `undenied ${run}` });
step('addDenylistAddress, listDenylist (paged), deleteDenylistAddress with notify:manage-denylist; denylisted addresses refused');

// ---- pulse, matrix, slack -----------------------------------------------------
await notify.pulse({ routingKey: `e2e.${run}`, message: { hello: run } });
await expectError(() => notify.pulse({ routingKey: 'bad.#', message: {} }), 400, 'InputError');
await notify.matrix({ roomId: `!room${run}:example.org`, body: `matrix ${run}`, format: 'org.matrix.custom.html', formattedBody: `<b>${run}</b>`, msgtype: 'm.text' });
await expectError(() => notify.matrix({ roomId: '#alias:example.org', body: 'x' }), 400, 'InputError');
await expectError(() => notify.matrix({ roomId: '!r:example.org', body: 'x', msgtype: 'm.image' }), 400, 'InputValidationError');
await notify.slack({ channelId: 'C0E2E', text: `slack ${run}`, blocks: [{ type: 'section', text: { type: 'mrkdwn', text: `*${run}*` } }] });
await expectError(() => notify.slack({ channelId: 'general', text: 'x' }), 400, 'InputError');
const roomScoped = new taskcluster.Notify({ rootUrl, credentials: await client('roomer', [`notify:matrix-room:!room${run}:example.org`, 'notify:pulse:e2e.*']), retries: 0 });
await roomScoped.matrix({ roomId: `!room${run}:example.org`, body: `scoped matrix ${run}` });
await expectError(() => roomScoped.matrix({ roomId: '!other:example.org', body: 'x' }), 403, 'InsufficientScopes');
await roomScoped.pulse({ routingKey: `e2e.${run}.scoped`, message: {} });
await expectError(() => roomScoped.pulse({ routingKey: `other.${run}`, message: {} }), 403, 'InsufficientScopes');
step('pulse, matrix and slack: stored with their scopes; malformed targets refused');

// ---- a task's routes ------------------------------------------------------------
const address = `nightly-${run}@example.com`;
const routes = [
  `notify.email.${address}.on-failed`,
  `notify.email.${address}.on-completed`,
  'notify.webhook.e2e.on-transition',
  `notify.pulse.e2e.${run}.task.on-any`,
  'notify.slack-channel.C0E2E.on-failed',
  `notify.matrix-room.!room${run}:example.org.on-resolved`,
  'notify.email.malformed.on-failed',
];
const noScopes = queue(await client('creator', [`queue:create-task:lowest:${tq}`, 'queue:scheduler-id:-']));
err = await expectError(() => noScopes.createTask(taskcluster.slugid(), taskDef(tq, { routes: [`notify.email.${address}.on-failed`] })), 403, 'InsufficientScopes');
assert.match(err.message, /queue:route:notify\.email/);
const taskId = taskcluster.slugid();
await q.createTask(taskId, taskDef(tq, {
  routes,
  metadata: { name: `nightly ${run}`, description: 'nightly build', owner: 'ci@example.com', source: 'https://example.com/ci' },
  extra: { notify: { email: { subject: 'Nightly ${task.metadata.name} is ${status.state}' } } },
}));
const claimed = await q.claimWork(tq, { ...worker, tasks: 1 });
assert.equal(claimed.tasks.length, 1);
const wq = queue(claimed.tasks[0].credentials);
await wq.reportFailed(taskId, 0);
const other = taskcluster.slugid();
await q.createTask(other, taskDef(tq, { routes: [`notify.email.${address}.on-failed`] }));
await q.cancelTask(other);
step('routes need queue:route:notify.*; a task with notify routes is created, run and failed');

// Delivery, as hopper's own listing reports it.
let list;
for (let i = 0; i < 200; i++) {
  list = JSON.parse((await rawGet(`${rootUrl}/api/notify/v1/task/${taskId}/notifications`)).body);
  if (list.notifications.every((n) => n.state !== 'pending')) break;
  await new Promise((r) => setTimeout(r, 100));
}
const summary = list.notifications.map((n) => `${n.event} ${n.channel} ${n.target} ${n.state}`);
console.log(JSON.stringify(summary));
assert.deepEqual(summary.filter((s) => s.includes(' email ')), [
  `task-failed email ${address} sent`,
  'task-failed email malformed refused',
]);
assert.ok(summary.includes('task-defined webhook e2e sent'), summary.join('\n'));
assert.ok(summary.includes('task-failed webhook e2e sent'), summary.join('\n'));
assert.ok(summary.includes('task-failed slack-channel C0E2E sent'), summary.join('\n'));
assert.ok(summary.includes(`task-failed matrix-room !room${run}:example.org sent`), summary.join('\n'));
const refused = list.notifications.find((n) => n.state === 'refused');
assert.match(refused.error, /not a plain email address/);
assert.equal(JSON.parse((await rawGet(`${rootUrl}/api/notify/v1/task/${other}/notifications`)).body).notifications.length, 0, 'a cancelled task notifies nobody');
console.log(`TASK ${taskId}`);

// Every event, each on its own route, to one address: a task defined,
// pending, running, then resolved as an exception.
const events = `events-${run}@example.com`;
const deciders = ['defined', 'pending', 'running', 'completed', 'failed', 'exception', 'resolved', 'any'];
const eventsTask = taskcluster.slugid();
await q.createTask(eventsTask, taskDef(tq, { routes: deciders.map((d) => `notify.email.${events}.on-${d}`),
  metadata: { name: `events ${run}`, description: 'every event', owner: 'ci@example.com', source: 'https://example.com/ci' } }));
const c2 = await q.claimWork(tq, { ...worker, tasks: 1 });
assert.equal(c2.tasks.length, 1);
await queue(c2.tasks[0].credentials).reportException(eventsTask, 0, { reason: 'malformed-payload' });
for (let i = 0; i < 200; i++) {
  list = JSON.parse((await rawGet(`${rootUrl}/api/notify/v1/task/${eventsTask}/notifications`)).body);
  if (list.notifications.length === 6 && list.notifications.every((n) => n.state !== 'pending')) break;
  await new Promise((r) => setTimeout(r, 100));
}
assert.deepEqual(list.notifications.map((n) => `${n.event} ${n.route.split('.').pop()} ${n.state}`), [
  'task-defined on-defined sent', 'task-pending on-pending sent', 'task-running on-running sent',
  'task-exception on-exception sent', 'task-exception on-resolved sent', 'task-exception on-any sent',
]);
console.log(`EVENTS ${eventsTask}`);
step("the task's notifications are sent and listed with their delivery state");
