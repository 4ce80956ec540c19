// Task queues: the home page lists them with their pending and claimed
// counts; a queue's page lists its pending and claimed tasks, live.
import { useEffect } from 'preact/hooks';
import { enc, get, listAll } from '../api';
import { Card, ErrorBox, Loading, QueueLink, TaskLink, useAsync } from '../components';
import { fmtTime, since } from '../format';
import { subscribe } from '../live';
import type { TaskQueue } from '../types';

interface Counts {
  pendingTasks: number;
  claimedTasks: number;
}

export function HomePage() {
  const queues = useAsync(async () => {
    const list = await listAll<TaskQueue>('queue', '/task-queues', 'taskQueues', 2000);
    const counts = await Promise.all(list.map((q) => get<Counts>('queue', `/task-queues/${enc(q.taskQueueId)}/counts`).catch(() => null)));
    return list.map((q, i) => ({ ...q, counts: counts[i] }));
  }, []);
  // Counts change with every event; re-read them at most every 2 s.
  useEffect(() => {
    let last = 0, timer = 0;
    return subscribe({}, () => {
      const wait = Math.max(0, last + 2000 - Date.now());
      if (timer) return;
      timer = window.setTimeout(() => {
        timer = 0;
        last = Date.now();
        void queues.reload();
      }, wait);
    }, () => void queues.reload());
  }, []);
  return (
    <div>
      <h1>Task queues</h1>
      <p class="lead">Each queue with the tasks waiting for a worker and those running. <a href="#/tasks">All tasks →</a> · <a href="#/create">Create a task →</a></p>
      {queues.loading && !queues.data && <Loading what="task queues" />}
      <ErrorBox error={queues.error} />
      {queues.data && (queues.data.length === 0 ? <p class="empty">No task queue has been used yet. Create a task to start one.</p> : (
        <div class="table-wrap">
          <table class="queues">
            <thead><tr><th>task queue</th><th>pending</th><th>claimed</th><th>last active</th><th>workers</th></tr></thead>
            <tbody>
              {queues.data.map((q) => {
                const [prov, wt] = q.taskQueueId.split('/');
                return (
                  <tr key={q.taskQueueId}>
                    <td><QueueLink id={q.taskQueueId} /></td>
                    <td class={`count pending${q.counts?.pendingTasks ? '' : ' zero'}`}>{q.counts?.pendingTasks ?? '?'}</td>
                    <td class={`count running${q.counts?.claimedTasks ? '' : ' zero'}`}>{q.counts?.claimedTasks ?? '?'}</td>
                    <td>{since(q.lastDateActive)}</td>
                    <td><a href={`#/workers/${enc(prov)}/${enc(wt)}`}>workers</a></td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ))}
    </div>
  );
}

/** FlowKey is one flow key of a queue (/api/flow/v1/task-queues/<q>/keys). */
interface FlowKey {
  key: string;
  limit: number;
  supersede: boolean;
  cancelInProgress: boolean;
  pending: number;
  running: number;
  limited: number;
  superseded: number;
  canceled: number;
}

/** FlowKeys shows the queue's flow-controlled keys, if it has any. */
function FlowKeys({ keys }: { keys: FlowKey[] }) {
  if (keys.length === 0) return null;
  const policy = (k: FlowKey) => [k.limit ? `limit ${k.limit}` : '', k.supersede ? 'supersede' : '', k.cancelInProgress ? 'cancel in progress' : ''].filter(Boolean).join(', ');
  return (
    <Card title={`Flow keys (${keys.length})`}>
      <div class="table-wrap">
        <table class="flow-keys">
          <thead><tr><th>key</th><th>policy</th><th>running / limit</th><th>pending</th><th>held back</th><th>superseded</th><th>cancelled</th></tr></thead>
          <tbody>
            {keys.map((k) => (
              <tr key={k.key}>
                <td class="mono">{k.key}</td>
                <td>{policy(k)}</td>
                <td class="count running">{k.running} / {k.limit || '∞'}</td>
                <td class="count pending">{k.pending}</td>
                <td class="count">{k.limited}</td>
                <td class="count">{k.superseded}</td>
                <td class="count">{k.canceled}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </Card>
  );
}

interface Listed {
  taskId: string;
  runId?: number;
  task: { metadata: { name: string }; created?: string };
  inserted?: string;
  claimed?: string;
  workerGroup?: string;
  workerId?: string;
}

export function QueuePage({ taskQueueId }: { taskQueueId: string }) {
  const lists = useAsync(async () => {
    const [pending, claimed, flow] = await Promise.all([
      listAll<Listed>('queue', `/task-queues/${enc(taskQueueId)}/pending`, 'tasks', 5000),
      listAll<Listed>('queue', `/task-queues/${enc(taskQueueId)}/claimed`, 'tasks', 5000),
      // Flow keys are a hopper feature: a reader without the scope, or an
      // older server, just sees none.
      get<{ keys: FlowKey[] }>('flow', `/task-queues/${enc(taskQueueId)}/keys`).then((r) => r.keys, () => [] as FlowKey[]),
    ]);
    return { pending, claimed, flow };
  }, [taskQueueId]);
  useEffect(() => subscribe({ taskQueueId }, () => void lists.reload(), () => void lists.reload()), [taskQueueId]);
  const [prov, wt] = taskQueueId.split('/');
  return (
    <div>
      <h1 class="mono">{taskQueueId}</h1>
      <p class="lead"><a href={`#/workers/${enc(prov)}/${enc(wt)}`}>Workers of this queue →</a></p>
      <ErrorBox error={lists.error} />
      {lists.loading && !lists.data && <Loading what="tasks" />}
      {lists.data && <FlowKeys keys={lists.data.flow} />}
      {lists.data && (
        <div class="grid">
          <Card title={`Pending (${lists.data.pending.length})`}>
            {lists.data.pending.length === 0 ? <p class="empty">No pending tasks.</p> : (
              <ul class="plain">{lists.data.pending.map((t) => <li key={t.taskId}><TaskLink id={t.taskId} label={t.task.metadata.name} /> <span class="muted small">{fmtTime(t.inserted)}</span></li>)}</ul>
            )}
          </Card>
          <Card title={`Claimed (${lists.data.claimed.length})`}>
            {lists.data.claimed.length === 0 ? <p class="empty">No claimed tasks.</p> : (
              <ul class="plain">{lists.data.claimed.map((t) => <li key={t.taskId}><TaskLink id={t.taskId} label={t.task.metadata.name} /> <span class="muted small">{t.workerGroup}/{t.workerId} since {fmtTime(t.claimed)}</span></li>)}</ul>
            )}
          </Card>
        </div>
      )}
    </div>
  );
}
