// Tasks of every task queue, found by state, queue, group, name and
// creation time through hopper's own /api/hopper/v1/tasks (indexed in the
// store, so a million kept tasks page as fast as a hundred), newest first,
// a page at a time. Tasks on the page follow the live stream.
import { useEffect, useState } from 'preact/hooks';
import { call, listAll } from '../api';
import { Badge, Card, ErrorBox, QueueLink, TaskLink, VirtualList } from '../components';
import { count, fmtTime } from '../format';
import { subscribe, taskIdOf } from '../live';
import { STATES, type TaskQueue, type TaskStatus } from '../types';

export interface Row {
  taskId: string;
  name: string;
  state: string;
  taskQueueId: string;
  taskGroupId: string;
  /** The task's created time (ISO). */
  created: string;
}

/** Filters are the page's filters, as its address keeps them. */
export interface Filters {
  state: string;
  queue: string;
  group: string;
  name: string;
  /** within is a window ending now (ms); 0 means any time. */
  within: number;
}

export const WINDOWS: [string, number][] = [['any time', 0], ['last hour', 3600e3], ['last day', 86400e3], ['last week', 7 * 86400e3]];

/** readFilters takes the filters from the page's query. */
export function readFilters(q: URLSearchParams): Filters {
  return { state: q.get('state') ?? '', queue: q.get('queue') ?? '', group: q.get('group') ?? '', name: q.get('name') ?? '', within: Number(q.get('within') ?? 0) || 0 };
}

/** pageQuery is the page's own query string for f (empty fields left out). */
export function pageQuery(f: Filters): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (v) q.set(k, String(v));
  return q.toString();
}

/** apiQuery is the listTasks query of f at now, one page of limit tasks. */
export function apiQuery(f: Filters, now: number, limit: number, continuationToken?: string): URLSearchParams {
  const q = new URLSearchParams();
  if (f.state) q.set('state', f.state);
  if (f.queue.trim()) q.set('taskQueueId', f.queue.trim());
  if (f.group.trim()) q.set('taskGroupId', f.group.trim());
  if (f.name.trim()) q.set('name', f.name.trim());
  if (f.within) q.set('createdFrom', new Date(now - f.within).toISOString());
  q.set('limit', String(limit));
  if (continuationToken) q.set('continuationToken', continuationToken);
  return q;
}

interface Listed {
  tasks: { status: TaskStatus; task: { metadata: { name: string }; taskQueueId: string; taskGroupId: string; created: string } }[];
  continuationToken?: string;
}

const PAGE = 100;

export function TasksPage({ query }: { query: URLSearchParams }) {
  const applied = readFilters(query);
  const key = pageQuery(applied);
  const [draft, setDraft] = useState<Filters>(applied);
  const [rows, setRows] = useState<Row[]>([]);
  const [token, setToken] = useState<string | undefined>();
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<unknown>(null);
  const [queues, setQueues] = useState<string[]>([]);

  const load = async (more?: string) => {
    setLoading(true);
    setError(null);
    try {
      const res = await call<Listed>('hopper', 'GET', `/tasks?${apiQuery(applied, Date.now(), PAGE, more)}`);
      const page = res.tasks.map((t) => ({ taskId: t.status.taskId, name: t.task.metadata.name, state: t.status.state,
        taskQueueId: t.task.taskQueueId, taskGroupId: t.task.taskGroupId, created: t.task.created }));
      setRows((prev) => (more ? [...prev, ...page] : page));
      setToken(res.continuationToken);
    } catch (e) {
      setError(e);
    }
    setLoading(false);
  };
  useEffect(() => {
    setDraft(applied);
    setRows([]);
    void load();
  }, [key]);
  useEffect(() => {
    listAll<TaskQueue>('queue', '/task-queues', 'taskQueues', 2000).then((qs) => setQueues(qs.map((q) => q.taskQueueId)), () => setQueues([]));
  }, []);
  // Tasks on the page show their state as it changes.
  useEffect(() => subscribe({}, (e) => {
    const st = e.payload?.status as TaskStatus | undefined;
    const id = taskIdOf(e);
    if (!st || !id) return;
    setRows((prev) => (prev.some((r) => r.taskId === id) ? prev.map((r) => (r.taskId === id ? { ...r, state: st.state } : r)) : prev));
  }, () => void load()), [key]);

  const go = (f: Filters) => {
    const q = pageQuery(f);
    location.hash = `#/tasks${q ? '?' + q : ''}`;
  };
  const submit = (e: Event) => {
    e.preventDefault();
    go(draft);
  };
  const set = (k: keyof Filters, v: string | number, now = false) => {
    const f = { ...draft, [k]: v };
    setDraft(f);
    if (now) go(f);
  };
  return (
    <div>
      <h1>Tasks</h1>
      <p class="lead">Tasks of every queue, newest first: filter by state, queue, group, name and creation time.</p>
      <Card title={token ? `${rows.length}+ tasks` : count(rows.length, 'task')}>
        <form class="filters" onSubmit={submit} aria-label="task filters">
          <select aria-label="state" value={draft.state} onChange={(e) => set('state', (e.target as HTMLSelectElement).value, true)}>
            <option value="">any state</option>
            {STATES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
          <input aria-label="task queue" name="queue" list="task-queue-ids" placeholder="any queue" value={draft.queue} onInput={(e) => set('queue', (e.target as HTMLInputElement).value)} />
          <datalist id="task-queue-ids">{queues.map((q) => <option key={q} value={q} />)}</datalist>
          <input aria-label="task group" name="group" placeholder="any group" class="mono" value={draft.group} onInput={(e) => set('group', (e.target as HTMLInputElement).value)} />
          <input aria-label="name" name="name" placeholder="name contains" value={draft.name} onInput={(e) => set('name', (e.target as HTMLInputElement).value)} />
          <select aria-label="created" value={draft.within} onChange={(e) => set('within', Number((e.target as HTMLSelectElement).value), true)}>
            {WINDOWS.map(([label, ms]) => <option key={ms} value={ms}>{label}</option>)}
          </select>
          <button type="submit" id="tasks-search">Search</button>
        </form>
        <ErrorBox error={error} />
        {rows.length === 0 ? <p class="empty">{loading ? 'Loading tasks…' : 'No task matches.'}</p> : (
          <VirtualList items={rows} rowHeight={30} height={600} class="task-rows" row={(r) => (
            <div class="member">
              <Badge state={r.state} />
              <TaskLink id={r.taskId} label={r.name} />
              <QueueLink id={r.taskQueueId} />
              <span class="muted small">{fmtTime(r.created)}</span>
            </div>
          )} />
        )}
        {token && <button class="secondary" id="tasks-more" disabled={loading} onClick={() => void load(token)}>{loading ? 'Loading…' : `Load ${PAGE} more`}</button>}
      </Card>
    </div>
  );
}
