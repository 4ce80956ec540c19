// The Worker Manager service through the official client: every method of
// the WorkerManager reference with Taskcluster's scopes; a static pool's
// worker registers with its staticSecret, uses the credentials it got
// (claimWork, the pool's secret), reregisters, and is refused once
// removed; bad input answers Taskcluster's error bodies without secrets.
import { taskcluster, assert, expectError, step, rootUrl, credentialsFromEnv, taskDef } from './lib.mjs';

const root = credentialsFromEnv();
const opts = { rootUrl, retries: 0 };
const wm = new taskcluster.WorkerManager({ ...opts, credentials: root });
const anon = new taskcluster.WorkerManager(opts);
const auth = new taskcluster.Auth({ ...opts, credentials: root });
const secrets = new taskcluster.Secrets({ ...opts, credentials: root });
const run = `e2e${Date.now() % 1000000}`;
const poolId = `${run}/static-pool`;
const staticSecret = taskcluster.slugid() + taskcluster.slugid();

// ---- health ---------------------------------------------------------------------------
assert.equal((await wm.ping()).alive, true);
await wm.lbheartbeat();
assert.deepEqual(await wm.heartbeat(), {});
assert.ok((await wm.version()).version);
step('ping, lbheartbeat, heartbeat, version');

// ---- providers ------------------------------------------------------------------------
const providers = await wm.listProviders();
assert.ok(providers.providers.some((p) => p.providerId === 'static' && p.providerType === 'static'), JSON.stringify(providers));
const onePage = await wm.listProviders({ limit: 1 });
assert.equal(onePage.providers.length, 1);
await expectError(() => anon.listProviders(), 403, 'InsufficientScopes');
step('listProviders');

// ---- pools ----------------------------------------------------------------------------
const poolDef = {
  providerId: 'static', description: 'machines in the rack', owner: 'ops@example.com', emailOnError: false,
  config: { lifecycle: { reregistrationTimeout: 3600 }, workerConfig: { genericWorker: { config: { idleTimeoutSecs: 5 } } } },
};
let pool = await wm.createWorkerPool(poolId, poolDef);
assert.equal(pool.workerPoolId, poolId);
assert.equal(pool.providerId, 'static');
assert.deepEqual(pool.config, poolDef.config);
assert.equal(pool.currentCapacity, 0);
await expectError(() => wm.createWorkerPool(poolId, poolDef), 409, 'RequestConflict');
let err = await expectError(() => wm.createWorkerPool(`${run}/bad-provider`, { ...poolDef, providerId: 'nope' }), 400, 'InputError');
assert.ok(err.body.message.includes('Invalid Provider'));
err = await expectError(() => wm.createWorkerPool(`${run}/bad-config`, { ...poolDef, config: { minCapacity: 3 } }), 400, 'InputValidationError');
await expectError(() => wm.createWorkerPool(`${run}/bad-owner`, { ...poolDef, owner: 'not an email' }), 400, 'InputValidationError');
await expectError(() => wm.createWorkerPool('no-slash', poolDef), 400);
assert.deepEqual((await wm.workerPool(poolId)).config, poolDef.config);
await expectError(() => wm.workerPool(`${run}/missing`), 404, 'ResourceNotFound');

pool = await wm.updateWorkerPool(poolId, { ...poolDef, workerPoolId: poolId, created: pool.created, lastModified: pool.lastModified, description: 'updated' });
await expectError(() => wm.updateWorkerPool(poolId, { ...pool, description: 'x' }), 400, 'InputValidationError');
assert.equal(pool.description, 'updated');
await expectError(() => wm.updateWorkerPool(poolId, { ...poolDef, workerPoolId: `${run}/other` }), 400, 'InputError');
await expectError(() => wm.updateWorkerPool(`${run}/missing`, poolDef), 404, 'ResourceNotFound');

await wm.createWorkerPool(`${run}/second`, poolDef);
const ids = [];
let token;
do {
  const page = await wm.listWorkerPools({ limit: 1, ...(token ? { continuationToken: token } : {}) });
  ids.push(...page.workerPools.map((p) => p.workerPoolId));
  token = page.continuationToken;
} while (token);
assert.ok(ids.includes(poolId) && ids.includes(`${run}/second`));
const stats = await wm.listWorkerPoolsStats();
assert.ok(stats.workerPoolsStats.some((s) => s.workerPoolId === poolId && s.runningCount === 0));
assert.deepEqual(await wm.workerPoolStats(poolId), { launchConfigStats: [] });
assert.deepEqual(await wm.listWorkerPoolLaunchConfigs(poolId), { workerPoolLaunchConfigs: [] });
await expectError(() => wm.listWorkerPoolLaunchConfigs(`${run}/missing`), 404, 'ResourceNotFound');

let deleted = await wm.deleteWorkerPool(`${run}/second`);
assert.equal(deleted.providerId, 'null-provider');
await expectError(() => wm.deleteWorkerPool(`${run}/missing`), 404, 'ResourceNotFound');
step('createWorkerPool, updateWorkerPool, deleteWorkerPool, workerPool, listWorkerPools, listWorkerPoolsStats, workerPoolStats, listWorkerPoolLaunchConfigs');

// ---- pool scopes ---------------------------------------------------------------------
async function client(id, scopes) {
  const { accessToken } = await auth.createClient(`${run}/${id}`, {
    description: id, expires: taskcluster.fromNowJSON('1 hour'), scopes,
  });
  return new taskcluster.WorkerManager({ ...opts, credentials: { clientId: `${run}/${id}`, accessToken } });
}
const manager = await client('manager', [`worker-manager:manage-worker-pool:${run}/*`]);
await expectError(() => manager.createWorkerPool(`${run}/by-manager`, poolDef), 403, 'InsufficientScopes');
const full = await client('full', [`worker-manager:manage-worker-pool:${run}/*`, 'worker-manager:provider:static']);
await full.createWorkerPool(`${run}/by-full`, poolDef);
await expectError(() => full.workerPool(poolId), 403, 'InsufficientScopes');
await expectError(() => full.listWorkerPools(), 403, 'InsufficientScopes');
await expectError(() => anon.createWorker(poolId, 'rack', 'w0', { expires: taskcluster.fromNowJSON('1 day'), providerInfo: { staticSecret } }), 403, 'InsufficientScopes');
step('pool scopes: manage-worker-pool with provider, get-worker-pool, list-worker-pools');

// ---- workers ---------------------------------------------------------------------------
const expires = taskcluster.fromNowJSON('1 day');
let worker = await wm.createWorker(poolId, 'rack', 'machine-1', { expires, capacity: 2, providerInfo: { staticSecret } });
assert.equal(worker.state, 'running');
assert.equal(worker.capacity, 2);
assert.equal(worker.providerId, 'static');
assert.deepEqual(await wm.createWorker(poolId, 'rack', 'machine-1', { expires, capacity: 2, providerInfo: { staticSecret } }), worker, 'same worker twice');
err = await expectError(() => wm.createWorker(poolId, 'rack', 'machine-1', { expires, providerInfo: { staticSecret: taskcluster.slugid() + taskcluster.slugid() } }), 400, 'InputError');
assert.ok(!JSON.stringify(err.body).includes(staticSecret));
err = await expectError(() => wm.createWorker(poolId, 'rack', 'machine-2', { expires }), 400, 'InputError');
assert.match(err.message, /staticSecret/);
err = await expectError(() => wm.createWorker(poolId, 'rack', 'machine-2', { expires: taskcluster.fromNowJSON('-1 hour'), providerInfo: { staticSecret } }), 400, 'InputError');
assert.equal(err.body.requestInfo.payload.providerInfo.staticSecret, '(OMITTED)');
await expectError(() => wm.createWorker(poolId, 'rack', 'machine-2', { expires, providerInfo: { staticSecret: 'short' } }), 400, 'InputValidationError');
await expectError(() => wm.createWorker(`${run}/missing`, 'rack', 'machine-2', { expires, providerInfo: { staticSecret } }), 404, 'ResourceNotFound');
await wm.createWorker(poolId, 'rack', 'machine-2', { expires, providerInfo: { staticSecret: taskcluster.slugid() + taskcluster.slugid() } });
await wm.createWorker(poolId, 'shelf', 'machine-3', { expires, providerInfo: { staticSecret: taskcluster.slugid() + taskcluster.slugid() } });

worker = await wm.updateWorker(poolId, 'rack', 'machine-2', { expires, capacity: 3 });
assert.equal(worker.capacity, 3);
await expectError(() => wm.updateWorker(poolId, 'rack', 'nobody', { expires }), 404, 'ResourceNotFound');
assert.equal((await wm.worker(poolId, 'rack', 'machine-1')).capacity, 2);
await expectError(() => wm.worker(poolId, 'rack', 'nobody'), 404, 'ResourceNotFound');
const inPool = await wm.listWorkersForWorkerPool(poolId, { limit: 2 });
assert.equal(inPool.workers.length, 2);
assert.ok(inPool.continuationToken);
const rest = await wm.listWorkersForWorkerPool(poolId, { continuationToken: inPool.continuationToken });
assert.deepEqual([...inPool.workers, ...rest.workers].map((w) => w.workerId), ['machine-1', 'machine-2', 'machine-3']);
assert.equal((await wm.listWorkersForWorkerPool(poolId, { state: 'stopped' })).workers.length, 0);
await expectError(() => wm.listWorkersForWorkerPool(poolId, { state: 'sideways' }), 400);
await expectError(() => wm.listWorkersForWorkerPool(`${run}/missing`), 404, 'ResourceNotFound');
assert.deepEqual((await wm.listWorkersForWorkerGroup(poolId, 'shelf')).workers.map((w) => w.workerId), ['machine-3']);
pool = await wm.workerPool(poolId);
assert.equal(pool.runningCount, 3);
assert.equal(pool.runningCapacity, 6);
assert.equal(pool.currentCapacity, 6);
const lcStats = (await wm.workerPoolStats(poolId)).launchConfigStats;
assert.equal(lcStats.length, 1);
assert.equal(lcStats[0].runningCapacity, 6);
step('createWorker (static secret), updateWorker, worker, listWorkersForWorkerPool, listWorkersForWorkerGroup; pool counts');

// ---- registration ------------------------------------------------------------------------
await secrets.set(`worker-pool:${poolId}`, { secret: { config: { from: 'secret' } }, expires });
const reg = { workerPoolId: poolId, providerId: 'static', workerGroup: 'rack', workerId: 'machine-1' };
err = await expectError(() => anon.registerWorker({ ...reg, workerIdentityProof: { staticSecret: taskcluster.slugid() + taskcluster.slugid() } }), 400, 'InputError');
assert.match(err.message, /bad staticSecret/);
assert.equal(err.body.requestInfo.payload, '(OMITTED)');
await expectError(() => anon.registerWorker({ ...reg, workerId: 'nobody', workerIdentityProof: { staticSecret } }), 404, 'ResourceNotFound');
await expectError(() => anon.registerWorker({ ...reg, providerId: 'nope', workerIdentityProof: { staticSecret } }), 404, 'ResourceNotFound');
await expectError(() => anon.registerWorker({ ...reg, workerPoolId: `${run}/missing`, workerIdentityProof: { staticSecret } }), 404, 'ResourceNotFound');
const registered = await anon.registerWorker({ ...reg, workerIdentityProof: { staticSecret } });
assert.deepEqual(registered.workerConfig, poolDef.config.workerConfig);
assert.equal(registered.secret.length, 44);
assert.equal(registered.credentials.clientId, `worker/static/${poolId}/rack/machine-1`);
const lifetime = new Date(registered.expires) - Date.now();
assert.ok(lifetime > 3500e3 && lifetime <= 3600e3, `credentials last the pool's reregistrationTimeout: ${lifetime}`);
const cert = JSON.parse(registered.credentials.certificate);
for (const s of [`assume:worker-pool:${poolId}`, `assume:worker-id:rack/machine-1`, `queue:worker-id:rack/machine-1`,
  `secrets:get:worker-pool:${poolId}`, `queue:claim-work:${poolId}`, `worker-manager:remove-worker:${poolId}/rack/machine-1`,
  `worker-manager:reregister-worker:${poolId}/rack/machine-1`]) {
  assert.ok(cert.scopes.includes(s), `credentials carry ${s}`);
}
const workerCreds = registered.credentials;
const asWorker = new taskcluster.WorkerManager({ ...opts, credentials: workerCreds });
const workerSecrets = new taskcluster.Secrets({ ...opts, credentials: workerCreds });
assert.deepEqual((await workerSecrets.get(`worker-pool:${poolId}`)).secret, { config: { from: 'secret' } });
const workerQueue = new taskcluster.Queue({ ...opts, credentials: workerCreds });
const rootQueue = new taskcluster.Queue({ ...opts, credentials: root });
const taskId = taskcluster.slugid();
await rootQueue.createTask(taskId, taskDef(poolId));
const claim = await workerQueue.claimWork(poolId, { workerGroup: 'rack', workerId: 'machine-1', tasks: 1 });
assert.equal(claim.tasks.length, 1);
assert.equal(claim.tasks[0].status.taskId, taskId);
await expectError(() => workerQueue.claimWork(poolId, { workerGroup: 'rack', workerId: 'someone-else', tasks: 1 }), 403, 'InsufficientScopes');
step('registerWorker: static secret checked; credentials scoped as Taskcluster gives them claim work and read the pool secret');

// A static machine registers again when its worker-runner restarts.
const again = await anon.registerWorker({ ...reg, workerIdentityProof: { staticSecret } });
await expectError(() => asWorker.reregisterWorker({ workerPoolId: poolId, workerGroup: 'rack', workerId: 'machine-1', secret: registered.secret }), 400, 'InputError');
const reregister = (secret, workerId = 'machine-1') => asWorker.reregisterWorker({ workerPoolId: poolId, workerGroup: 'rack', workerId, secret });
const rereg = await reregister(again.secret);
assert.notEqual(rereg.secret, again.secret);
assert.ok(new Date(rereg.expires) > new Date(again.expires) - 1000);
// Its answer lost, a worker asks again with the secret it holds and gets
// another in place of the lost one; using the newest retires the others.
const retried = await reregister(again.secret);
assert.notEqual(retried.secret, rereg.secret);
await expectError(() => reregister(rereg.secret), 400, 'InputError');
const next = await reregister(retried.secret);
await expectError(() => reregister(again.secret), 400, 'InputError');
await expectError(() => reregister(next.secret, 'machine-2'), 403, 'InsufficientScopes');
step('reregisterWorker: the newest secret, or the one traded for it until the newest is used; scoped to the worker');

// ---- errors ---------------------------------------------------------------------------
const report = { workerGroup: 'rack', workerId: 'machine-1', kind: 'worker-error', title: 'disk full', description: 'no space left', extra: { disk: '/' } };
const reported = await asWorker.reportWorkerError(poolId, report);
assert.equal(reported.kind, 'worker-error');
assert.deepEqual(reported.extra, { disk: '/', workerGroup: 'rack', workerId: 'machine-1' });
await expectError(() => asWorker.reportWorkerError(poolId, { ...report, workerId: 'machine-2' }), 403, 'InsufficientScopes');
await expectError(() => anon.reportWorkerError(poolId, report), 403, 'InsufficientScopes');
await wm.reportWorkerError(poolId, { ...report, title: 'second' });
const errors = await wm.listWorkerPoolErrors(poolId);
assert.deepEqual(errors.workerPoolErrors.map((e) => e.title).sort(), ['disk full', 'second']);
assert.equal((await wm.listWorkerPoolErrors(poolId, { errorId: reported.errorId })).workerPoolErrors.length, 1);
assert.equal((await wm.listWorkerPoolErrors(poolId, { limit: 1 })).workerPoolErrors.length, 1);
let errStats = await wm.workerPoolErrorStats({ workerPoolId: poolId });
assert.equal(errStats.workerPoolId, poolId);
assert.equal(errStats.totals.total, 2);
assert.equal(errStats.totals.title['disk full'], 1);
assert.equal(errStats.totals.code['worker-error'], 2);
assert.equal(Object.keys(errStats.totals.daily).length, 7);
assert.equal(Object.keys(errStats.totals.hourly).length, 24);
errStats = await wm.workerPoolErrorStats();
assert.equal(errStats.workerPoolId, '');
assert.ok(errStats.totals.workerPool[poolId] === 2);
await expectError(() => anon.listWorkerPoolErrors(poolId), 403, 'InsufficientScopes');
await expectError(() => full.workerPoolErrorStats(), 403, 'InsufficientScopes');
step('reportWorkerError, listWorkerPoolErrors, workerPoolErrorStats');

// ---- queue views ------------------------------------------------------------------------
const listed = await wm.listWorkers(run, 'static-pool');
const m1 = listed.workers.find((w) => w.workerId === 'machine-1');
assert.equal(m1.state, 'running');
assert.equal(m1.capacity, 2);
assert.equal(m1.providerId, 'static');
assert.deepEqual(m1.latestTask, { taskId, runId: 0 });
assert.equal((await wm.listWorkers(run, 'static-pool', { workerState: 'stopped' })).workers.length, 0);
await rootQueue.quarantineWorker(run, 'static-pool', 'rack', 'machine-1', { quarantineUntil: taskcluster.fromNowJSON('1 hour'), quarantineInfo: 'e2e' });
assert.equal((await wm.listWorkers(run, 'static-pool', { quarantined: 'true' })).workers.length, 1);
const got = await wm.getWorker(run, 'static-pool', 'rack', 'machine-1');
assert.equal(got.state, 'running');
assert.equal(got.workerPoolId, poolId);
assert.deepEqual(got.recentTasks, [{ taskId, runId: 0 }]);
assert.ok(got.quarantineUntil);
await expectError(() => wm.getWorker(run, 'static-pool', 'rack', 'machine-9'), 404, 'ResourceNotFound');
await rootQueue.quarantineWorker(run, 'static-pool', 'rack', 'machine-1', { quarantineUntil: taskcluster.fromNowJSON('-1 hour') });
step('listWorkers, getWorker: the queue\'s workers with their pool state');

// ---- removal ---------------------------------------------------------------------------
await expectError(() => asWorker.removeWorker(poolId, 'rack', 'machine-2'), 403, 'InsufficientScopes');
assert.deepEqual(await asWorker.removeWorker(poolId, 'rack', 'machine-1'), {});
assert.equal((await wm.worker(poolId, 'rack', 'machine-1')).state, 'stopped');
const status = await rootQueue.status(taskId);
assert.equal(status.status.runs[0].state, 'exception');
assert.equal(status.status.runs[0].reasonResolved, 'worker-shutdown');
assert.equal(status.status.runs[1].state, 'pending');
assert.equal(status.status.runs[1].reasonCreated, 'retry');
step('removeWorker resolves the worker\'s claimed run exception/worker-shutdown at once and retries it');
err = await expectError(() => anon.registerWorker({ ...reg, workerIdentityProof: { staticSecret } }), 400, 'InputError');
assert.match(err.message, /not running/);
await expectError(() => asWorker.reregisterWorker({ workerPoolId: poolId, workerGroup: 'rack', workerId: 'machine-1', secret: rereg.secret }), 400, 'InputError');
assert.deepEqual(await wm.removeWorker(poolId, 'rack', 'machine-1'), {}, 'removing twice is no error');
await expectError(() => wm.removeWorker(poolId, 'rack', 'nobody'), 404, 'ResourceNotFound');
assert.equal((await wm.listWorkersForWorkerPool(poolId, { state: 'stopped' })).workers.length, 1);
assert.equal((await wm.workerPool(poolId)).stoppedCount, 1);
step('a removed worker can neither register nor reregister');
