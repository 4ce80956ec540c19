// The task life-cycle through the official client: create, dependencies,
// claimWork, reclaim with the claim's own credentials, every outcome,
// retries, reruns, cancellation, groups, queues and error codes.
import { taskcluster, assert, queue, taskDef, expectError, step } from './lib.mjs';

const q = queue();
const tq = `e2e-${Date.now() % 100000}/lifecycle`;
const worker = { workerGroup: 'e2e-group', workerId: 'e2e-worker' };

async function claimOne(expectTaskId) {
  const res = await q.claimWork(tq, { ...worker, tasks: 1 });
  assert.equal(res.tasks.length, 1, 'claimWork returned no task');
  const claim = res.tasks[0];
  if (expectTaskId) assert.equal(claim.status.taskId, expectTaskId);
  return claim;
}

function claimQueue(claim) {
  return queue(claim.credentials);
}

const ping = await q.ping();
assert.equal(ping.alive, true);
step('ping');

// A plain task becomes pending at once.
const a = taskcluster.slugid();
let r = await q.createTask(a, taskDef(tq, { routes: ['index.e2e.a'], scopes: [] }));
assert.equal(r.status.state, 'pending');
assert.equal(r.status.runs[0].reasonCreated, 'scheduled');
const def = await q.task(a);
assert.equal(def.taskQueueId, tq);
assert.equal(def.priority, 'lowest');
assert.equal(def.retries, 5);
assert.equal(def.schedulerId, '-');
assert.equal(def.taskGroupId, a);
assert.match(def.created, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
step('createTask pending with defaults');

// Idempotent repeat; a different definition conflicts.
const again = await q.createTask(a, { ...def });
assert.equal(again.status.taskId, a);
await expectError(() => q.createTask(a, { ...def, retries: 1 }), 409, 'RequestConflict');
step('createTask idempotency');

// A dependent waits.
const b = taskcluster.slugid();
r = await q.createTask(b, taskDef(tq, { dependencies: [a], taskGroupId: a }));
assert.equal(r.status.state, 'unscheduled');
const deps = await q.listDependentTasks(a);
assert.deepEqual(deps.tasks.map((t) => t.status.taskId), [b]);
step('dependency keeps the dependent unscheduled');

// Claim, reclaim with the claim credentials, complete.
const counts = await q.taskQueueCounts(tq);
assert.equal(counts.pendingTasks, 1);
let claim = await claimOne(a);
assert.equal(claim.runId, 0);
assert.equal(claim.status.state, 'running');
assert.equal(claim.task.taskQueueId, tq);
assert.deepEqual(claim.task, def, 'the claim carries the definition queue.task returns');
assert.match(claim.credentials.clientId, new RegExp(`^task-client/${a}/0/on/e2e-group/e2e-worker/until/`));
const cert = JSON.parse(claim.credentials.certificate);
assert.ok(cert.scopes.includes(`queue:resolve-task:${a}/0`));
const cq = claimQueue(claim);
const re = await cq.reclaimTask(a, 0);
assert.ok(new Date(re.takenUntil) >= new Date(claim.takenUntil));
assert.equal(re.status.runs[0].state, 'running');
const claimed = await q.listClaimedTasks(tq);
assert.deepEqual(claimed.tasks.map((t) => t.taskId), [a]);
r = await queue(re.credentials).reportCompleted(a, 0);
assert.equal(r.status.state, 'completed');
r = await q.reportCompleted(a, 0); // idempotent
assert.equal(r.status.state, 'completed');
await expectError(() => q.reportFailed(a, 0), 409, 'RequestConflict');
step('claimWork, reclaimTask, reportCompleted');

// The dependent became pending; claim it and fail it.
assert.equal((await q.status(b)).status.state, 'pending');
claim = await claimOne(b);
r = await claimQueue(claim).reportFailed(b, 0);
assert.equal(r.status.state, 'failed');
step('dependent scheduled after completion; reportFailed');

// Retries after worker-shutdown, then a final malformed-payload.
const c = taskcluster.slugid();
await q.createTask(c, taskDef(tq, { retries: 1 }));
claim = await claimOne(c);
r = await claimQueue(claim).reportException(c, 0, { reason: 'worker-shutdown' });
assert.equal(r.status.state, 'pending');
assert.equal(r.status.retriesLeft, 0);
assert.equal(r.status.runs[1].reasonCreated, 'retry');
assert.equal(r.status.runs[0].reasonResolved, 'worker-shutdown');
claim = await claimOne(c);
assert.equal(claim.runId, 1);
r = await claimQueue(claim).reportException(c, 1, { reason: 'malformed-payload' });
assert.equal(r.status.state, 'exception');
assert.equal(r.status.runs.length, 2);
await expectError(() => q.reportException(c, 1, { reason: 'internal-error' }), 409, 'RequestConflict');
await expectError(() => q.reportException(c, 1, { reason: 'no-such-reason' }), 400, 'InputValidationError');
step('reportException retries worker-shutdown, never malformed-payload');

// Rerun a resolved task; cancel it.
r = await q.rerunTask(c);
assert.equal(r.status.state, 'pending');
assert.equal(r.status.runs[2].reasonCreated, 'rerun');
r = await q.cancelTask(c);
assert.equal(r.status.state, 'exception');
assert.equal(r.status.runs[2].reasonResolved, 'canceled');
step('rerunTask and cancelTask');

// all-resolved dependents run after a failure; all-completed ones wait.
const d1 = taskcluster.slugid();
const d2 = taskcluster.slugid();
const d3 = taskcluster.slugid();
await q.createTask(d1, taskDef(tq));
await q.createTask(d2, taskDef(tq, { dependencies: [d1], requires: 'all-resolved' }));
await q.createTask(d3, taskDef(tq, { dependencies: [d1] }));
claim = await claimOne(d1);
await claimQueue(claim).reportFailed(d1, 0);
assert.equal((await q.status(d2)).status.state, 'pending');
assert.equal((await q.status(d3)).status.state, 'unscheduled');
r = await q.scheduleTask(d3);
assert.equal(r.status.state, 'pending');
step('requires all-resolved vs all-completed; scheduleTask');

// Priorities: the higher one is claimed first.
const low = taskcluster.slugid();
const high = taskcluster.slugid();
// drain what is pending first
for (;;) {
  const res = await q.claimWork(tq, { ...worker, tasks: 32 });
  if (res.tasks.length === 0) break;
  for (const t of res.tasks) await queue(t.credentials).reportCompleted(t.status.taskId, t.runId);
  const cnt = await q.pendingTasks(tq);
  if (cnt.pendingTasks === 0) break;
}
await q.createTask(low, taskDef(tq, { priority: 'low' }));
await q.createTask(high, taskDef(tq, { priority: 'high' }));
const pend = await q.listPendingTasks(tq);
assert.deepEqual(pend.tasks.map((t) => t.taskId), [low, high]);
claim = await claimOne(high);
await claimQueue(claim).reportCompleted(high, 0);
claim = await claimOne(low);
await claimQueue(claim).reportCompleted(low, 0);
step('priority order');

// Task groups: seal, cancel.
const g = taskcluster.slugid();
const g1 = taskcluster.slugid();
const g2 = taskcluster.slugid();
await q.createTask(g1, taskDef(tq, { taskGroupId: g }));
await q.createTask(g2, taskDef(tq, { taskGroupId: g, dependencies: [g1] }));
let group = await q.getTaskGroup(g);
assert.equal(group.taskGroupId, g);
assert.equal(group.sealed, undefined);
await expectError(() => q.cancelTaskGroup(g), 409, 'RequestConflict');
group = await q.sealTaskGroup(g);
assert.ok(group.sealed);
await expectError(() => q.createTask(taskcluster.slugid(), taskDef(tq, { taskGroupId: g })), 409, 'RequestConflict');
const cancelled = await q.cancelTaskGroup(g);
assert.equal(cancelled.taskGroupSize, 2);
assert.equal(cancelled.cancelledCount, 2);
const list = await q.listTaskGroup(g);
assert.deepEqual(list.tasks.map((t) => t.status.state).sort(), ['exception', 'exception']);
step('task groups: seal and cancel');

// Queue and worker views.
const queues = await q.listTaskQueues();
assert.ok(queues.taskQueues.some((x) => x.taskQueueId === tq));
const tqInfo = await q.getTaskQueue(tq);
assert.equal(tqInfo.taskQueueId, tq);
const [prov, wt] = tq.split('/');
const w = await q.getWorker(prov, wt, worker.workerGroup, worker.workerId);
assert.ok(w.recentTasks.length > 0);
const workers = await q.listWorkers(prov, wt);
assert.ok(workers.workers.some((x) => x.workerId === worker.workerId));
step('task queue and worker views');

// Error codes.
await expectError(() => q.task(taskcluster.slugid()), 404, 'ResourceNotFound');
await expectError(() => q.createTask(taskcluster.slugid(), taskDef(tq, { unknownField: 1 })), 400, 'InputValidationError');
await expectError(() => q.createTask(taskcluster.slugid(), taskDef(tq, { dependencies: [taskcluster.slugid()] })), 400, 'InputError');
await expectError(() => q.createTask(taskcluster.slugid(), taskDef(tq, { deadline: taskcluster.fromNowJSON('-1 hour') })), 400, 'InputError');
step('error codes');
console.log('lifecycle: all passed');
