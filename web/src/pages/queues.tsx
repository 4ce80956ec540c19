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
    const [pending, claimed] = await Promise.all([
      listAll<Listed>('queue', `/task-queues/${enc(taskQueueId)}/pending`, 'tasks', 5000),
      listAll<Listed>('queue', `/task-queues/${enc(taskQueueId)}/claimed`, 'tasks', 5000),
    ]);
    return { pending, claimed };
  }, [taskQueueId]);
  useEffect(() => subscribe({ taskQueueId }, () => void lists.reload(), () => void lists.reload()), [taskQueueId]);
  const [prov, wt] = taskQueueId.split('/');
  return (
    <div>
      <h1 class="mono">{taskQueueId}</h1>
      <p class="lead"><a href={`#/workers/${enc(prov)}/${enc(wt)}`}>Workers of this queue →</a></p>
      <ErrorBox error={lists.error} />
      {lists.loading && !lists.data && <Loading what="tasks" />}
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
