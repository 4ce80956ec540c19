// Tasks across every task queue, filtered by state, queue and time. The
// Queue API lists a queue's pending and claimed tasks; tasks resolving
// while the page is open join from the live stream, so the list shows
// what is happening now.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { enc, listAll } from '../api';
import { Badge, Card, ErrorBox, Loading, QueueLink, TaskLink, VirtualList, useAsync } from '../components';
import { fmtTime } from '../format';
import { subscribe, taskIdOf } from '../live';
import { STATES, type TaskQueue, type TaskStatus } from '../types';

export interface Row {
  taskId: string;
  name: string;
  state: string;
  taskQueueId: string;
  /** When the row's state began (ms): queued, claimed or resolved. */
  since: number;
}

/** filterRows applies the page's filters: state, queue and a time window (ms). */
export function filterRows(rows: Row[], f: { state: string; queue: string; within: number }, now: number): Row[] {
  return rows.filter((r) => (!f.state || r.state === f.state) && (!f.queue || r.taskQueueId === f.queue) &&
    (!f.within || now - r.since <= f.within)).sort((a, b) => b.since - a.since);
}

const WINDOWS: [string, number][] = [['any time', 0], ['last 5 minutes', 5 * 60e3], ['last hour', 3600e3], ['last day', 86400e3]];

export function TasksPage({ query }: { query: URLSearchParams }) {
  const [state, setState] = useState(query.get('state') ?? '');
  const [queue, setQueue] = useState(query.get('queue') ?? '');
  const [within, setWithin] = useState(Number(query.get('within') ?? 0));
  const seen = useRef(new Map<string, Row>());
  // seen is mutated in place; version makes the list re-derive.
  const [version, bump] = useState(0);
  const data = useAsync(async () => {
    const queues = await listAll<TaskQueue>('queue', '/task-queues', 'taskQueues', 2000);
    const rows: Row[] = [];
    await Promise.all(queues.map(async (q) => {
      const [pending, claimed] = await Promise.all([
        listAll<{ taskId: string; task: { metadata: { name: string } }; inserted: string }>('queue', `/task-queues/${enc(q.taskQueueId)}/pending`, 'tasks', 2000),
        listAll<{ taskId: string; task: { metadata: { name: string } }; claimed: string }>('queue', `/task-queues/${enc(q.taskQueueId)}/claimed`, 'tasks', 2000),
      ]);
      for (const t of pending) rows.push({ taskId: t.taskId, name: t.task.metadata.name, state: 'pending', taskQueueId: q.taskQueueId, since: Date.parse(t.inserted) });
      for (const t of claimed) rows.push({ taskId: t.taskId, name: t.task.metadata.name, state: 'running', taskQueueId: q.taskQueueId, since: Date.parse(t.claimed) });
    }));
    return { queues: queues.map((q) => q.taskQueueId), rows };
  }, []);
  useEffect(() => {
    if (data.data) for (const r of data.data.rows) if (!seen.current.has(r.taskId)) seen.current.set(r.taskId, r);
    bump((n) => n + 1);
  }, [data.data]);
  useEffect(() => subscribe({}, (e) => {
    const st = e.payload?.status as TaskStatus | undefined;
    const id = taskIdOf(e);
    if (!st || !id) return;
    const prev = seen.current.get(id);
    seen.current.set(id, { taskId: id, name: prev?.name ?? id, state: st.state, taskQueueId: st.taskQueueId, since: Date.now() });
    bump((n) => n + 1);
  }, () => {
    seen.current.clear();
    void data.reload();
  }), []);
  useEffect(() => {
    const q = new URLSearchParams();
    if (state) q.set('state', state);
    if (queue) q.set('queue', queue);
    if (within) q.set('within', String(within));
    history.replaceState(null, '', `#/tasks${q.toString() ? '?' + q : ''}`);
  }, [state, queue, within]);
  const rows = useMemo(() => filterRows([...seen.current.values()], { state, queue, within }, Date.now()), [version, state, queue, within]);
  if (data.loading && !data.data) return <Loading what="tasks of every queue" />;
  return (
    <div>
      <h1>Tasks</h1>
      <p class="lead">Pending and running tasks of every queue, and tasks that change while this page is open.</p>
      <ErrorBox error={data.error} />
      <Card title={`${rows.length} tasks`}>
        <div class="filters">
          <select aria-label="state" value={state} onChange={(e) => setState((e.target as HTMLSelectElement).value)}>
            <option value="">any state</option>
            {STATES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
          <select aria-label="task queue" value={queue} onChange={(e) => setQueue((e.target as HTMLSelectElement).value)}>
            <option value="">any queue</option>
            {(data.data?.queues ?? []).map((q) => <option key={q} value={q}>{q}</option>)}
          </select>
          <select aria-label="time" value={within} onChange={(e) => setWithin(Number((e.target as HTMLSelectElement).value))}>
            {WINDOWS.map(([label, ms]) => <option key={ms} value={ms}>{label}</option>)}
          </select>
        </div>
        {rows.length === 0 ? <p class="empty">No task matches.</p> : (
          <VirtualList items={rows} rowHeight={30} height={600} class="task-rows" row={(r) => (
            <div class="member">
              <Badge state={r.state} />
              <TaskLink id={r.taskId} label={r.name} />
              <QueueLink id={r.taskQueueId} />
              <span class="muted small">{fmtTime(new Date(r.since).toISOString())}</span>
            </div>
          )} />
        )}
      </Card>
    </div>
  );
}
