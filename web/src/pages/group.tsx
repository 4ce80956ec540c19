// A task group: progress, its tasks as a list, a dependency graph and a
// timeline of runs with the critical path; cancel and seal; live updates
// applied task by task (a 10,000-task group is read once, then patched).
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { call, enc, get, listAll } from '../api';
import { Action, Badge, Card, ErrorBox, Kv, Loading, Tabs, TaskLink, VirtualList } from '../components';
import { count, fmtDuration, fmtTime } from '../format';
import { subscribe, taskIdOf } from '../live';
import { RESOLVED, STATES, anyUnresolved, type GroupMember, type State, type TaskDefinition } from '../types';
import { Graph } from './graph';
import { sortMembers, type MemberOrder } from '../graph';
import { runDuration } from '../liveness';
import { Timeline } from './timeline';

interface GroupInfo {
  taskGroupId: string;
  schedulerId: string;
  expires: string;
  sealed?: string;
}

export function GroupPage({ taskGroupId, view }: { taskGroupId: string; view: string }) {
  const [members, setMembers] = useState<GroupMember[] | null>(null);
  const [info, setInfo] = useState<GroupInfo | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loaded, setLoaded] = useState(0);
  const [cancelUsed, setCancelUsed] = useState(false);
  const [live, setLive] = useState(false);
  const index = useRef(new Map<string, GroupMember>());
  const pending = useRef<Map<string, GroupMember>>(new Map());
  const frame = useRef(0);

  const load = async () => {
    try {
      const [all, gi] = await Promise.all([
        listAll<GroupMember>('queue', `/task-group/${enc(taskGroupId)}/list`, 'tasks', 100000, (items) => setLoaded(items.length)),
        get<GroupInfo>('queue', `/task-group/${enc(taskGroupId)}`).catch(() => null),
      ]);
      index.current = new Map(all.map((m) => [m.status.taskId, m]));
      setMembers(all);
      setInfo(gi);
      setError(null);
    } catch (e) {
      setError(e);
    }
  };
  // Events arrive in bursts; they are applied once per animation frame.
  const flush = () => {
    frame.current = 0;
    const updates = pending.current;
    pending.current = new Map();
    for (const [id, m] of updates) index.current.set(id, m);
    setMembers([...index.current.values()]);
  };
  useEffect(() => {
    void load();
    return subscribe({ taskGroupId }, async (e) => {
      if (e.exchange === 'task-group-sealed' || e.exchange === 'task-group-resolved') {
        setInfo(await get<GroupInfo>('queue', `/task-group/${enc(taskGroupId)}`).catch(() => null));
        return;
      }
      const id = taskIdOf(e);
      if (!id) return;
      let m = index.current.get(id);
      if (!m) {
        const task = await get<TaskDefinition>('queue', `/task/${enc(id)}`).catch(() => null);
        if (!task) return;
        m = { task, status: e.payload?.status ?? (await get<{ status: GroupMember['status'] }>('queue', `/task/${enc(id)}/status`)).status };
      }
      const status = e.payload?.status ?? (await get<{ status: GroupMember['status'] }>('queue', `/task/${enc(id)}/status`)).status;
      pending.current.set(id, { task: m.task, status });
      if (!frame.current) frame.current = requestAnimationFrame(flush);
    }, () => void load(), setLive);
  }, [taskGroupId]);

  if (error && !members) return <ErrorBox error={error} />;
  if (!members) return <Loading what={`task group ${taskGroupId} (${count(loaded, 'task')} so far)`} />;
  const counts: Record<string, number> = {};
  for (const m of members) counts[m.status.state] = (counts[m.status.state] ?? 0) + 1;
  const resolved = members.filter((m) => RESOLVED.has(m.status.state)).length;
  const base = `#/group/${taskGroupId}`;
  return (
    <div class="group-page">
      <div class="title-row">
        <h1>Task group</h1>
        <span class={`live ${live ? 'on' : ''}`}>{live ? 'live' : 'connecting…'}</span>
      </div>
      <p class="subtitle mono">{taskGroupId}</p>
      <Card title={`${resolved} / ${members.length} resolved`} actions={
        <div class="actions">
          <Action label="Seal group" id="seal-group" confirm="Seal this group (no new tasks may join)?" run={async () => {
            const r = await call<GroupInfo>('queue', 'POST', `/task-group/${enc(taskGroupId)}/seal`);
            setInfo(r);
            return `Sealed at ${fmtTime(r.sealed)}.`;
          }} />
          {(cancelUsed || anyUnresolved(members.map((m) => m.status.state))) && (
            <Action label="Cancel group" id="cancel-group" danger confirm="Cancel every unresolved task of this (sealed) group?" run={async () => {
              setCancelUsed(true); // keeps its outcome in view once all is resolved
              const r = await call<{ cancelledCount?: number; taskGroupSize?: number }>('queue', 'POST', `/task-group/${enc(taskGroupId)}/cancel`);
              void load();
              return `Cancelled ${r.cancelledCount ?? '?'} of ${count(r.taskGroupSize ?? members.length, 'task')}.`;
            }} />
          )}
        </div>
      }>
        <div class="progress" role="img" aria-label="progress">
          {(['completed', 'failed', 'exception', 'running', 'pending', 'unscheduled'] as State[]).map((s) => counts[s] ? (
            <div key={s} class={`seg seg-${s}`} style={{ flexGrow: counts[s] }} title={`${s}: ${counts[s]}`} />
          ) : null)}
        </div>
        <div class="chips">{STATES.map((s) => <span key={s} class="chip"><Badge state={s} /> {counts[s] ?? 0}</span>)}</div>
        {info && <Kv pairs={[['Scheduler', info.schedulerId], ['Expires', fmtTime(info.expires)], ['Sealed', info.sealed ? fmtTime(info.sealed) : 'no']]} />}
      </Card>
      <Tabs current={view} tabs={[['list', 'Tasks', `${base}/list`], ['graph', 'Dependency graph', `${base}/graph`], ['timeline', 'Timeline', `${base}/timeline`]]} />
      {view === 'graph' ? <Graph members={members} /> : view === 'timeline' ? <Timeline members={members} /> : <MemberList members={members} />}
    </div>
  );
}

function MemberList({ members }: { members: GroupMember[] }) {
  const [state, setState] = useState<string>('');
  const [text, setText] = useState('');
  const [order, setOrder] = useState<MemberOrder>('pipeline');
  const shown = useMemo(() => sortMembers(members.filter((m) => (!state || m.status.state === state) &&
    (!text || m.task.metadata.name.toLowerCase().includes(text.toLowerCase()) || m.status.taskId.includes(text))), order, Date.now()), [members, state, text, order]);
  return (
    <Card title={`Tasks (${shown.length}${shown.length !== members.length ? ` of ${members.length}` : ''})`}>
      <div class="filters">
        <select value={state} onChange={(e) => setState((e.target as HTMLSelectElement).value)} aria-label="state">
          <option value="">any state</option>
          {STATES.map((s) => <option key={s} value={s}>{s}</option>)}
        </select>
        <input class="filter" placeholder="name or taskId" value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />
        <select value={order} onChange={(e) => setOrder((e.target as HTMLSelectElement).value as MemberOrder)} aria-label="order" name="order">
          <option value="pipeline">pipeline order</option>
          <option value="state">by state (failures first)</option>
          <option value="duration">by duration (longest first)</option>
        </select>
      </div>
      <VirtualList items={shown} rowHeight={30} height={600} class="members" row={(m) => (
        <div class="member">
          <Badge state={m.status.state} />
          <TaskLink id={m.status.taskId} label={m.task.metadata.name || m.status.taskId} />
          <span class="mono muted small">{m.status.taskId}</span>
          <span class="muted small">{m.status.taskQueueId}</span>
          <span class="muted small">{took(m)}</span>
        </div>
      )} />
    </Card>
  );
}

/** took is how long a task's last run took (or has run so far). */
function took(m: GroupMember): string {
  const r = m.status.runs[m.status.runs.length - 1];
  const d = runDuration(r, Date.now());
  return Number.isNaN(d) ? '' : fmtDuration(d) + (r?.state === 'running' ? ' so far' : '');
}
