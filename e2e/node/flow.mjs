// Flow control through the official client, with a worker that knows
// nothing about it: a plain claimWork / reportCompleted loop. The
// declaration is extra.flow (and a coalesce.v1.<key> route), which the
// client and Taskcluster's task schema accept unchanged.
import { taskcluster, assert, queue, taskDef, expectError, step } from './lib.mjs';

const q = queue();
const tq = `e2e-${Date.now() % 100000}/flow`;
const worker = { workerGroup: 'e2e-group', workerId: 'plain-worker' };

async function create(extra, overrides = {}) {
  const id = taskcluster.slugid();
  await q.createTask(id, taskDef(tq, { extra, ...overrides }));
  return id;
}

async function claim(tasks) {
  const res = await q.claimWork(tq, { ...worker, tasks });
  return res.tasks;
}

async function complete(c) {
  await queue(c.credentials).reportCompleted(c.status.taskId, c.runId);
}

async function lastRun(taskId) {
  const { status } = await q.status(taskId);
  return status.runs[status.runs.length - 1];
}

// ---- validation --------------------------------------------------------------
{
  const bad = [
    [{ flow: { key: 'k', limit: 0 } }, /limit must be between 1 and 10000, got 0/],
    [{ flow: { key: 'k', limt: 1 } }, /unknown field "limt"/],
    [{ flow: { limit: 1 } }, /set task.extra.flow.key or add a route coalesce.v1.<key>/],
    [{ flow: { key: 'k' } }, /is given without a policy/],
    [{ flow: { supersede: 'yes', key: 'k' } }, /task.extra.flow must be an object/],
  ];
  for (const [extra, message] of bad) {
    const err = await expectError(() => q.createTask(taskcluster.slugid(), taskDef(tq, { extra })), 400, 'InputValidationError');
    assert.match(err.message, message);
  }
}
step('a malformed extra.flow is refused with InputValidationError saying what is wrong');

// ---- limit ---------------------------------------------------------------------
{
  const limited = [];
  for (let i = 0; i < 3; i++) limited.push(await create({ flow: { key: 'deploy', limit: 1 } }));
  const first = await claim(4);
  assert.deepEqual(first.map((c) => c.status.taskId), [limited[0]], 'one task of the key');
  // The key is at its limit: a task without a key is still handed out, the
  // key's tasks are skipped.
  const plain = await create({});
  const next = await claim(4);
  assert.deepEqual(next.map((c) => c.status.taskId), [plain]);
  assert.equal((await q.pendingTasks(tq)).pendingTasks, 2, 'held-back tasks stay pending');
  await complete(next[0]);
  await complete(first[0]);
  const after = await claim(4);
  assert.deepEqual(after.map((c) => c.status.taskId), [limited[1]], 'room again: the next task of the key');
  await complete(after[0]);
  const last = await claim(4);
  assert.deepEqual(last.map((c) => c.status.taskId), [limited[2]]);
  await complete(last[0]);
}
step('limit: claimWork skips a key at its limit and hands out the rest');

// ---- supersede -------------------------------------------------------------------
{
  const ids = [];
  for (let i = 0; i < 3; i++) {
    ids.push(await create({ flow: { supersede: true } }, { routes: ['coalesce.v1.lint'] }));
  }
  const got = await claim(1);
  assert.deepEqual(got.map((c) => c.status.taskId), [ids[2]], 'the newest task is handed out');
  for (const id of ids.slice(0, 2)) {
    const r = await lastRun(id);
    assert.equal(r.state, 'exception');
    assert.equal(r.reasonResolved, 'superseded');
    const a = await q.artifact(id, r.runId, 'public/superseded-by.json');
    const body = await (await fetch(a.url)).json();
    assert.deepEqual(body, { taskId: ids[2], runId: 0 });
  }
  const a = await q.artifact(ids[2], 0, 'public/supersedes.json');
  assert.deepEqual(await (await fetch(a.url)).json(), [{ taskId: ids[0], runId: 0 }, { taskId: ids[1], runId: 0 }]);
  await complete(got[0]);
}
step('supersede: the newest task runs, older ones end exception/superseded with superseded-by.json');

// ---- cancel-in-progress ------------------------------------------------------------
{
  const old = await create({ flow: { key: 'preview', cancelInProgress: true } });
  const [c] = await claim(1);
  assert.equal(c.status.taskId, old);
  const newer = await create({ flow: { key: 'preview', cancelInProgress: true } });
  const r = await lastRun(old);
  assert.equal(r.state, 'exception');
  assert.equal(r.reasonResolved, 'canceled');
  // The plain worker learns it when it reports.
  await expectError(() => complete(c), 409, 'RequestConflict');
  const [n] = await claim(1);
  assert.equal(n.status.taskId, newer);
  await complete(n);
}
step('cancel-in-progress: a new task cancels the running one');

// ---- fail-fast ---------------------------------------------------------------------
{
  const group = taskcluster.slugid();
  const failing = await create({ flow: { failFast: true } }, { taskGroupId: group, priority: 'high' });
  const others = [await create({}, { taskGroupId: group }), await create({}, { taskGroupId: group })];
  const [c] = await claim(1);
  assert.equal(c.status.taskId, failing);
  await queue(c.credentials).reportFailed(failing, 0);
  for (const id of others) {
    const r = await lastRun(id);
    assert.equal(r.state, 'exception');
    assert.equal(r.reasonResolved, 'canceled');
  }
}
step('fail-fast: the first failure cancels the rest of the group');
