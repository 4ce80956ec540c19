// A task: its definition, runs, artifacts, log and dependencies, the
// actions an operator takes on it, and live updates pushed by the server.
import { useEffect, useRef, useState } from 'preact/hooks';
import { artifactUrl, call, enc, get, listAll } from '../api';
import { Action, Badge, Card, ErrorBox, GroupLink, Kv, Loading, QueueLink, TaskLink, safeHref, useAsync } from '../components';
import { count, fmtDuration, fmtTime } from '../format';
import { subscribe } from '../live';
import { useSession } from '../signin';
import type { Artifact, TaskDefinition, TaskStatus } from '../types';
import { LogPanel } from './log';
import { interactiveCopy, slugid } from '../taskdef';
import { ShellPanel } from '../terminal';

interface TaskData {
  task: TaskDefinition;
  status: TaskStatus;
}

export function TaskPage({ taskId }: { taskId: string }) {
  useSession(); // re-render (and re-sign links) on sign-in
  const data = useAsync<TaskData>(async () => {
    const [task, st] = await Promise.all([
      get<TaskDefinition>('queue', `/task/${enc(taskId)}`),
      get<{ status: TaskStatus }>('queue', `/task/${enc(taskId)}/status`),
    ]);
    return { task, status: st.status };
  }, [taskId]);
  const [live, setLive] = useState(false);
  const [cancelled, setCancelled] = useState(false);
  // Artifacts created after the page loaded (a cancelled run's uploaded
  // log, the live log turned into a link to it) change no state; the card
  // lists them again at most once a second.
  const [artifactsChanged, setArtifactsChanged] = useState(0);
  const artifactsTimer = useRef<number | undefined>(undefined);
  useEffect(() => () => window.clearTimeout(artifactsTimer.current), []);
  useEffect(() => subscribe({ taskId }, (e) => {
    if (e.exchange === 'artifact-created' && artifactsTimer.current === undefined) {
      artifactsTimer.current = window.setTimeout(() => {
        artifactsTimer.current = undefined;
        setArtifactsChanged((n) => n + 1);
      }, 1000);
    }
    if (e.payload?.status && data.data) data.set({ ...data.data, status: e.payload.status });
    else void data.reload();
  }, () => void data.reload(), setLive), [taskId, data.data === undefined]);

  if (data.loading && !data.data) return <Loading what={`task ${taskId}`} />;
  if (!data.data) return <ErrorBox error={data.error} />;
  const { task, status } = data.data;
  const latest = status.runs[status.runs.length - 1];
  return (
    <div class="task-page">
      <div class="title-row">
        <h1>{task.metadata.name}</h1>
        <Badge state={status.state} />
        <span class={`live ${live ? 'on' : ''}`} title="updates pushed by the server">{live ? 'live' : 'connecting…'}</span>
      </div>
      <p class="subtitle mono">{taskId}</p>
      {latest?.reasonResolved === 'superseded' && <Superseded taskId={taskId} runId={latest.runId} />}
      {status.state === 'unscheduled' && (task.dependencies ?? []).some((d) => d !== taskId) && (
        <Blocked deps={(task.dependencies ?? []).filter((d) => d !== taskId)} requires={task.requires ?? 'all-completed'} deadline={status.deadline} />
      )}
      <Card title="Actions">
        <div class="actions">
          {/* A resolved task cannot be cancelled (the queue would answer with
              its status unchanged); a cancel made here stays to show its outcome. */}
          {(!['completed', 'failed', 'exception'].includes(status.state) || cancelled) && (
            <Action label="Cancel" id="cancel" confirm="Cancel this task?" danger run={async () => {
              // Set first: the live stream may report the task resolved
              // before this call returns.
              setCancelled(true);
              const r = await call<{ status: TaskStatus }>('queue', 'POST', `/task/${enc(taskId)}/cancel`);
              data.set({ task, status: r.status });
              return `Cancelled: the task is ${r.status.state}.`;
            }} />
          )}
          <Action label="Rerun" id="rerun" run={async () => {
            const r = await call<{ status: TaskStatus }>('queue', 'POST', `/task/${enc(taskId)}/rerun`);
            data.set({ task, status: r.status });
            return `Run ${r.status.runs.length - 1} added: the task is ${r.status.state}.`;
          }} />
          {status.state === 'unscheduled' && (
            <Action label="Schedule" id="schedule" run={async () => {
              const r = await call<{ status: TaskStatus }>('queue', 'POST', `/task/${enc(taskId)}/schedule`);
              data.set({ task, status: r.status });
              return `Scheduled: the task is ${r.status.state}.`;
            }} />
          )}
          <a class="button" href={`#/retrigger/${taskId}`} data-action="retrigger">Retrigger with edits…</a>
          <Action label="Create interactive task" id="create-interactive" run={async () => {
            // A copy with features.interactive on, to debug it from inside.
            const id = slugid();
            await call('queue', 'PUT', `/task/${enc(id)}`, interactiveCopy(task, Date.now()));
            location.hash = `#/task/${id}`;
            return `Created interactive task ${id}.`;
          }} />
        </div>
      </Card>
      <div class="grid">
        <Card title="Task">
          <Kv pairs={[
            ['Task queue', <QueueLink id={status.taskQueueId} />],
            ['Task group', <GroupLink id={status.taskGroupId} />],
            ['Scheduler', status.schedulerId],
            ['Created', fmtTime(task.created)],
            ['Deadline', fmtTime(status.deadline)],
            ['Expires', fmtTime(status.expires)],
            ['Retries left', String(status.retriesLeft)],
            ['Owner', task.metadata.owner],
            ['Source', safeHref(task.metadata.source) ? <a href={safeHref(task.metadata.source)} rel="noopener noreferrer">{task.metadata.source}</a> : task.metadata.source],
            ['Description', task.metadata.description],
          ]} />
        </Card>
        <Card title="Runs">
          {status.runs.length === 0 ? <p class="empty">No runs yet.</p> : (
            <div class="table-wrap">
              <table>
                <thead><tr><th>run</th><th>state</th><th>reason</th><th>worker</th><th>started</th><th>duration</th></tr></thead>
                <tbody>
                  {status.runs.map((r) => (
                    <tr key={r.runId}>
                      <td>{r.runId}</td>
                      <td><Badge state={r.state} /></td>
                      <td>{r.reasonCreated}{r.reasonResolved ? ` → ${r.reasonResolved}` : ''}</td>
                      <td>{r.workerId ? <a class="mono" href={`#/worker/${enc(status.provisionerId)}/${enc(status.workerType)}/${enc(r.workerGroup!)}/${enc(r.workerId)}`}>{r.workerGroup}/{r.workerId}</a> : ''}</td>
                      <td>{fmtTime(r.started)}</td>
                      <td>{r.started ? fmtDuration((r.resolved ? Date.parse(r.resolved) : Date.now()) - Date.parse(r.started)) : ''}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </Card>
      </div>
      {(task.payload?.features as { interactive?: boolean } | undefined)?.interactive && latest?.state === 'running' && (
        <Card title="Shell"><ShellPanel taskId={taskId} taskQueueId={status.taskQueueId} /></Card>
      )}
      {latest && <Artifacts taskId={taskId} runId={latest.runId} state={latest.state} changed={artifactsChanged} />}
      <Card title="Log"><LogPanel taskId={taskId} status={status} task={task} /></Card>
      {(task.routes ?? []).some((r) => r.startsWith('notify.')) && <Notifications taskId={taskId} state={status.state} runs={status.runs.length} />}
      <Dependencies task={task} taskId={taskId} />
      <Card title="Definition">
        <details class="payload"><summary>task definition (JSON)</summary><pre>{JSON.stringify(task, null, 2)}</pre></details>
      </Card>
    </div>
  );
}

/** Superseded links a superseded task to the task that ran in its place. */
/**
 * Blocked says why an unscheduled task waits: with requires all-completed,
 * a dependency that failed or ended in exception means it will never run
 * (unless that task is rerun and completes) and resolves at its deadline.
 */
function Blocked({ deps, requires, deadline }: { deps: string[]; requires: string; deadline: string }) {
  const states = useAsync(async () => Promise.all(deps.slice(0, 100).map(async (id) => {
    const [st, def] = await Promise.all([get<{ status: TaskStatus }>('queue', `/task/${enc(id)}/status`), get<TaskDefinition>('queue', `/task/${enc(id)}`)]);
    return { id, state: st.status.state, name: def.metadata?.name ?? id };
  })), [deps.join(',')]);
  if (!states.data) return null;
  const failed = requires === 'all-completed' ? states.data.filter((d) => d.state === 'failed' || d.state === 'exception') : [];
  const waiting = states.data.filter((d) => !['completed', 'failed', 'exception'].includes(d.state));
  if (failed.length) {
    return (
      <div class="notice blocked" role="status">
        Blocked: {failed.map((d, i) => <span key={d.id}>{i ? ', ' : ''}<TaskLink id={d.id} label={d.name} /> {d.state}</span>)}
        {' '}— this task needs all its dependencies completed, so it will not run unless {failed.length > 1 ? 'they are' : 'that task is'} rerun
        and complete{failed.length > 1 ? '' : 's'}; otherwise it resolves exception at its deadline ({fmtTime(deadline)}).
      </div>
    );
  }
  if (waiting.length) {
    return <div class="notice waiting" role="status">Waiting for {waiting.length} of {count(deps.length, 'dependency', 'dependencies')}: {waiting.slice(0, 5).map((d, i) => <span key={d.id}>{i ? ', ' : ''}<TaskLink id={d.id} label={d.name} /> {d.state}</span>)}{waiting.length > 5 ? ', …' : ''}.</div>;
  }
  return null;
}

function Superseded({ taskId, runId }: { taskId: string; runId: number }) {
  const by = useAsync(async () => {
    const content = await get<{ url?: string }>('queue', `/task/${enc(taskId)}/runs/${runId}/artifact-content/public/superseded-by.json`);
    if (!content.url) return null;
    const res = await fetch(content.url);
    return (await res.json()) as { taskId: string; runId?: number };
  }, [taskId, runId]);
  return (
    <div class="notice superseded">
      This task was superseded{by.data ? <>: <TaskLink id={by.data.taskId} /> ran in its place.</> : by.error ? ' (its public/superseded-by.json cannot be read).' : '…'}
    </div>
  );
}

function Artifacts({ taskId, runId, state, changed }: { taskId: string; runId: number; state: string; changed: number }) {
  const list = useAsync(() => listAll<Artifact>('queue', `/task/${enc(taskId)}/runs/${runId}/artifacts`, 'artifacts', 5000), [taskId, runId, state, changed]);
  const [urls, setUrls] = useState<Record<string, string>>({});
  const creds = useSession();
  useEffect(() => {
    let gone = false;
    void (async () => {
      const out: Record<string, string> = {};
      for (const a of list.data ?? []) out[a.name] = await artifactUrl(taskId, runId, a.name);
      if (!gone) setUrls(out);
    })();
    return () => {
      gone = true;
    };
  }, [list.data, creds]);
  return (
    <Card title={`Artifacts of run ${runId}`}>
      <ErrorBox error={list.error} />
      {list.data && list.data.length === 0 && <p class="empty">No artifacts.</p>}
      {list.data && list.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead><tr><th>name</th><th>storage</th><th>content type</th><th>expires</th></tr></thead>
            <tbody>
              {list.data.map((a) => (
                <tr key={a.name}>
                  <td>{urls[a.name] ? <a class="mono artifact" href={urls[a.name]} rel="noopener noreferrer" target="_blank">{a.name}</a> : <span class="mono">{a.name}</span>}
                    {!a.name.startsWith('public/') && <span class="muted small"> {creds ? 'private: signed link' : 'private: sign in to open'}</span>}</td>
                  <td>{a.storageType}</td>
                  <td>{a.contentType}</td>
                  <td>{fmtTime(a.expires)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Card>
  );
}

interface Notification {
  id: string;
  channel: string;
  target: string;
  route: string;
  event: string;
  runId?: number;
  state: string;
  attempts: number;
  error?: string;
  updated: string;
  nextAttempt?: string;
}

/** NOTIFICATION_LOOK shows a notification's state in the colours of the task state it resembles. */
const NOTIFICATION_LOOK: Record<string, string> = {
  pending: 'pending', sent: 'completed', failed: 'failed', refused: 'exception', denied: 'exception', 'rate-limited': 'exception',
};

/** Notifications lists what the task's notify.* routes produced and what became of each. */
function Notifications({ taskId, state, runs }: { taskId: string; state: string; runs: number }) {
  const list = useAsync(() => listAll<Notification>('notify', `/task/${enc(taskId)}/notifications`, 'notifications', 1000), [taskId, state, runs]);
  const pending = (list.data ?? []).some((n) => n.state === 'pending');
  useEffect(() => {
    if (!pending) return;
    const t = setTimeout(() => void list.reload(), 2000);
    return () => clearTimeout(t);
  }, [pending, list.data]);
  return (
    <Card title="Notifications">
      <ErrorBox error={list.error} />
      {list.data && list.data.length === 0 && <p class="empty">None yet.</p>}
      {list.data && list.data.length > 0 && (
        <div class="table-wrap">
          <table class="notifications">
            <thead><tr><th>event</th><th>channel</th><th>to</th><th>state</th><th>attempts</th><th>updated</th><th>reason</th></tr></thead>
            <tbody>
              {list.data.map((n) => (
                <tr key={n.id} data-state={n.state}>
                  <td>{n.event}{n.runId !== undefined ? ` (run ${n.runId})` : ''}</td>
                  <td>{n.channel}</td>
                  <td class="mono">{n.target}</td>
                  <td><span class={`state state-${NOTIFICATION_LOOK[n.state] ?? 'unknown'}`}>{n.state}</span></td>
                  <td>{n.attempts}</td>
                  <td>{fmtTime(n.updated)}{n.nextAttempt ? <span class="muted small"> next try {fmtTime(n.nextAttempt)}</span> : ''}</td>
                  <td class="small">{n.error ?? ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Card>
  );
}

function Dependencies({ task, taskId }: { task: TaskDefinition; taskId: string }) {
  const deps = task.dependencies ?? [];
  const statuses = useAsync(async () => {
    if (!deps.length) return [] as TaskStatus[];
    const r = await call<{ statuses: { taskId: string; status: TaskStatus }[] }>('queue', 'POST', '/tasks/status', { taskIds: deps.slice(0, 1000) });
    return r.statuses.map((s) => s.status);
  }, [taskId]);
  const dependents = useAsync(() => listAll<{ status: TaskStatus; task: TaskDefinition }>('queue', `/task/${enc(taskId)}/dependents`, 'tasks', 1000), [taskId]);
  const byId = new Map((statuses.data ?? []).map((s) => [s.taskId, s]));
  return (
    <div class="grid">
      <Card title={`Dependencies (${deps.length}, requires ${task.requires ?? 'all-completed'})`}>
        {deps.length === 0 ? <p class="empty">None.</p> : (
          <ul class="plain">{deps.map((d) => <li key={d}><Badge state={byId.get(d)?.state} /> <TaskLink id={d} /></li>)}</ul>
        )}
        <ErrorBox error={statuses.error} />
      </Card>
      <Card title="Dependents">
        <ErrorBox error={dependents.error} />
        {dependents.data && (dependents.data.length === 0 ? <p class="empty">None.</p> : (
          <ul class="plain">{dependents.data.map((d) => <li key={d.status.taskId}><Badge state={d.status.state} /> <TaskLink id={d.status.taskId} label={d.task.metadata.name} /></li>)}</ul>
        ))}
      </Card>
    </div>
  );
}
