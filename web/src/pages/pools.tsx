// Worker pools (the Worker Manager, /api/worker-manager/v1): each pool's
// provider and capacity (min / requested / running / max) against the
// pending tasks of its task queue; a pool's workers with their state and
// last task, its errors; creating or editing a pool from YAML; removing a
// worker (its claimed tasks go back to pending at once).
import { useState } from 'preact/hooks';
import { call, enc, get, listAll } from '../api';
import { Action, Badge, Card, ErrorBox, Kv, Loading, QueueLink, TaskLink, useAsync } from '../components';
import { fmtTime } from '../format';
import { bounds, poolDocument, workerBadge, type PoolConfig } from '../pools';
import { AccessError, useSession } from '../signin';
import { needsSignIn } from '../access';

export interface WorkerPool {
  workerPoolId: string;
  providerId: string;
  description: string;
  owner: string;
  emailOnError: boolean;
  config: PoolConfig;
  created: string;
  lastModified: string;
  currentCapacity: number;
  requestedCapacity: number;
  runningCapacity: number;
  stoppingCapacity: number;
  requestedCount: number;
  runningCount: number;
  stoppingCount: number;
  stoppedCount: number;
}

interface QueueWorker {
  workerGroup: string;
  workerId: string;
  state: string;
  capacity: number;
  providerId: string;
  firstClaim?: string;
  lastDateActive?: string;
  quarantineUntil?: string;
  latestTask?: { taskId: string; runId: number };
}

interface PoolWorker {
  workerGroup: string;
  workerId: string;
  state: string;
  capacity: number;
  created: string;
  expires: string;
}

interface PoolError {
  errorId: string;
  reported: string;
  kind: string;
  title: string;
  description: string;
}

const poolHref = (id: string) => `#/pools/${enc(id)}`;

function pending(poolId: string) {
  return get<{ pendingTasks: number; claimedTasks: number }>('queue', `/task-queues/${enc(poolId)}/counts`);
}

export function PoolsPage({ workerPoolId }: { workerPoolId?: string }) {
  const signedIn = !!useSession();
  if (workerPoolId) return <PoolPage key={workerPoolId} workerPoolId={workerPoolId} />;
  const pools = useAsync(async () => {
    const list = await listAll<WorkerPool>('worker-manager', '/worker-pools', 'workerPools', 1000);
    const counts = await Promise.all(list.map((p) => pending(p.workerPoolId).catch(() => undefined)));
    return list.map((p, i) => ({ pool: p, counts: counts[i] }));
  }, []);
  return (
    <div>
      <h1>Worker pools</h1>
      {pools.loading && !pools.data && <Loading what="worker pools" />}
      <AccessError error={pools.error} what="the worker pools" />
      {pools.data && (
        <Card title={`Pools (${pools.data.length})`}>
          {pools.data.length === 0 ? <p class="empty">No worker pool yet: create one below, or with <code>hopper pool create</code>.</p> : (
            <table class="list pools">
              <thead><tr><th>Pool</th><th>Provider</th><th>Min</th><th>Requested</th><th>Running</th><th>Max</th><th>Pending tasks</th><th>Claimed</th></tr></thead>
              <tbody>
                {pools.data.map(({ pool: p, counts }) => {
                  const b = bounds(p);
                  return (
                    <tr key={p.workerPoolId}>
                      <td><a class="mono" href={poolHref(p.workerPoolId)}>{p.workerPoolId}</a></td>
                      <td>{p.providerId}</td>
                      <td>{b.min}</td>
                      <td>{p.requestedCapacity}</td>
                      <td>{p.runningCapacity}</td>
                      <td>{b.max}</td>
                      <td>{counts?.pendingTasks ?? '?'}</td>
                      <td>{counts?.claimedTasks ?? '?'}</td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          )}
        </Card>
      )}
      {signedIn ? <PoolEditor onSaved={() => pools.reload()} /> : !pools.error && <p class="notice">Sign in to create a worker pool.</p>}
    </div>
  );
}

const TEMPLATE = `# The pool's id is <provisionerId>/<workerType>, its task queue.
workerPoolId: proj/linux
providerId: static
description: the build machines
owner: ops@example.com
emailOnError: false
config:
  lifecycle:
    reregistrationTimeout: 86400
  workerConfig: {}
`;

function PoolEditor({ pool, onSaved }: { pool?: WorkerPool; onSaved: () => void }) {
  const initial = pool ? toYaml(pool) : TEMPLATE;
  const [text, setText] = useState(initial);
  const save = async () => {
    const { id, body } = poolDocument(text);
    if (pool) {
      await call('worker-manager', 'POST', `/worker-pool/${enc(id)}`, body);
    } else {
      await call('worker-manager', 'PUT', `/worker-pool/${enc(id)}`, body);
    }
    onSaved();
    return `Worker pool ${id} ${pool ? 'updated' : 'created'}.`;
  };
  return (
    <Card title={pool ? 'Edit (YAML)' : 'Create a pool (YAML)'}>
      <textarea class="definition mono pool-yaml" rows={14} spellcheck={false} value={text}
        onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} aria-label="worker pool definition (YAML or JSON)" />
      <p><Action id={pool ? 'update-pool' : 'create-pool'} label={pool ? 'Save' : 'Create'} run={save} /></p>
    </Card>
  );
}

function toYaml(p: WorkerPool): string {
  const doc = { workerPoolId: p.workerPoolId, providerId: p.providerId, description: p.description, owner: p.owner, emailOnError: p.emailOnError, config: p.config };
  return JSON.stringify(doc, null, 2);
}

function PoolPage({ workerPoolId }: { workerPoolId: string }) {
  const signedIn = !!useSession();
  const [p, w] = workerPoolId.split('/');
  const pool = useAsync(() => get<WorkerPool>('worker-manager', `/worker-pool/${enc(workerPoolId)}`), [workerPoolId]);
  const counts = useAsync(() => pending(workerPoolId), [workerPoolId]);
  const workers = useAsync(async () => {
    const managed = await listAll<PoolWorker>('worker-manager', `/workers/${enc(workerPoolId)}`, 'workers', 2000);
    const seen = await listAll<QueueWorker>('worker-manager', `/provisioners/${enc(p)}/worker-types/${enc(w)}/workers`, 'workers', 2000).catch(() => []);
    const byKey = new Map(seen.map((q) => [`${q.workerGroup}/${q.workerId}`, q]));
    return managed.map((m) => ({ ...m, queue: byKey.get(`${m.workerGroup}/${m.workerId}`) }));
  }, [workerPoolId]);
  const errors = useAsync(() => get<{ workerPoolErrors: PoolError[] }>('worker-manager', `/worker-pool-errors/${enc(workerPoolId)}?limit=20`), [workerPoolId]);
  const b = pool.data ? bounds(pool.data) : undefined;
  return (
    <div>
      <h1>Worker pool <span class="mono">{workerPoolId}</span></h1>
      <p class="crumbs"><a href="#/pools">all pools</a> <span class="sep">›</span> task queue <QueueLink id={workerPoolId} /></p>
      <AccessError error={pool.error} what={`the worker pool ${workerPoolId}`} />
      {pool.data && b && (
        <Card title="Capacity">
          <Kv pairs={[
            ['Provider', pool.data.providerId],
            ['Description', pool.data.description],
            ['Capacity', <span class="capacity">min {b.min} / requested {pool.data.requestedCapacity} / running {pool.data.runningCapacity} / max {b.max}</span>],
            ['Pending tasks', <span class="pending-count">{counts.data ? `${counts.data.pendingTasks} pending, ${counts.data.claimedTasks} claimed` : '…'}</span>],
            ['Workers', `${pool.data.requestedCount} requested, ${pool.data.runningCount} running, ${pool.data.stoppingCount} stopping, ${pool.data.stoppedCount} stopped`],
            ['Owner', pool.data.owner],
            ['Last modified', fmtTime(pool.data.lastModified)],
          ]} />
        </Card>
      )}
      {!needsSignIn(workers.error, signedIn) && <ErrorBox error={workers.error} />}
      {workers.data && (
        <Card title={`Workers (${workers.data.length})`}>
          {workers.data.length === 0 ? <p class="empty">No worker yet: add a machine with <code>hopper pool add-worker</code>.</p> : (
            <table class="list pool-workers">
              <thead><tr><th>Worker</th><th>State</th><th>Capacity</th><th>Last task</th><th>Last active</th><th>Expires</th><th></th></tr></thead>
              <tbody>
                {workers.data.map((wk) => (
                  <tr key={`${wk.workerGroup}/${wk.workerId}`}>
                    <td class="mono"><a href={`#/worker/${enc(p)}/${enc(w)}/${enc(wk.workerGroup)}/${enc(wk.workerId)}`}>{wk.workerGroup}/{wk.workerId}</a></td>
                    <td><span class="worker-state"><Badge state={workerBadge(wk.state)} label={wk.state} /></span></td>
                    <td>{wk.capacity}</td>
                    <td>{wk.queue?.latestTask ? <TaskLink id={wk.queue.latestTask.taskId} /> : '–'}</td>
                    <td>{fmtTime(wk.queue?.lastDateActive)}</td>
                    <td>{fmtTime(wk.expires)}</td>
                    <td>{(wk.state === 'running' || wk.state === 'requested') && (
                      <Action id={`remove-${wk.workerGroup}-${wk.workerId}`} label="Remove" danger confirm="Its claimed tasks go back to pending now."
                        run={async () => {
                          await call('worker-manager', 'DELETE', `/workers/${enc(workerPoolId)}/${enc(wk.workerGroup)}/${enc(wk.workerId)}`);
                          await Promise.all([workers.reload(), pool.reload(), counts.reload()]);
                          return `Worker ${wk.workerGroup}/${wk.workerId} removed.`;
                        }} />
                    )}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </Card>
      )}
      {!needsSignIn(errors.error, signedIn) && <ErrorBox error={errors.error} />}
      {errors.data && (
        <Card title={`Errors (${errors.data.workerPoolErrors.length})`}>
          {errors.data.workerPoolErrors.length === 0 ? <p class="empty">No errors.</p> : (
            <table class="list pool-errors">
              <thead><tr><th>Reported</th><th>Kind</th><th>Title</th><th>Description</th></tr></thead>
              <tbody>
                {errors.data.workerPoolErrors.map((e) => (
                  <tr key={e.errorId}><td>{fmtTime(e.reported)}</td><td>{e.kind}</td><td>{e.title}</td><td>{e.description}</td></tr>
                ))}
              </tbody>
            </table>
          )}
        </Card>
      )}
      {pool.data && signedIn && <PoolEditor pool={pool.data} onSaved={() => pool.reload()} />}
    </div>
  );
}
