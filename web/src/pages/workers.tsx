// Workers: provisioner → worker type → workers (online or offline, busy
// slots against capacity), and a worker's page with the runs it holds, its
// recent tasks and quarantine.
import { useState } from 'preact/hooks';
import { call, enc, get, listAll } from '../api';
import { Action, Card, ErrorBox, Kv, Loading, QueueLink, TaskLink, useAsync } from '../components';
import { fmtDuration, fmtTime, since } from '../format';
import { holds, livenessLabel, runDuration, slots } from '../liveness';
import { SignInForm, useSession } from '../signin';
import type { Run, TaskDefinition, TaskStatus, Worker, WorkerLoad, WorkerSummary } from '../types';

const crumbs = (p?: string, wt?: string) => (
  <p class="crumbs">
    <a href="#/workers">Provisioners</a>
    {p && <> <span class="sep">›</span> <a href={`#/workers/${enc(p)}`}>{p}</a></>}
    {wt && <> <span class="sep">›</span> <a href={`#/workers/${enc(p!)}/${enc(wt)}`}>{wt}</a></>}
  </p>
);

export function WorkersPage({ provisionerId, workerType }: { provisionerId?: string; workerType?: string }) {
  if (provisionerId && workerType) return <WorkerList provisionerId={provisionerId} workerType={workerType} />;
  if (provisionerId) return <WorkerTypes provisionerId={provisionerId} />;
  return <Provisioners />;
}

function Provisioners() {
  const list = useAsync(() => listAll<{ provisionerId: string; lastDateActive?: string; description?: string }>('queue', '/provisioners', 'provisioners', 1000), []);
  return (
    <div>
      <h1>Workers</h1>
      {crumbs()}
      <ErrorBox error={list.error} />
      {list.loading && !list.data && <Loading what="provisioners" />}
      {list.data && (list.data.length === 0 ? <p class="empty">No worker has claimed work yet.</p> : (
        <ul class="plain big">{list.data.map((p) => <li key={p.provisionerId}><a href={`#/workers/${enc(p.provisionerId)}`}>{p.provisionerId}</a> <span class="muted small">active {since(p.lastDateActive)}</span></li>)}</ul>
      ))}
    </div>
  );
}

function WorkerTypes({ provisionerId }: { provisionerId: string }) {
  const list = useAsync(() => listAll<{ workerType: string; lastDateActive?: string }>('queue', `/provisioners/${enc(provisionerId)}/worker-types`, 'workerTypes', 1000), [provisionerId]);
  return (
    <div>
      <h1>{provisionerId}</h1>
      {crumbs(provisionerId)}
      <ErrorBox error={list.error} />
      {list.data && (list.data.length === 0 ? <p class="empty">No worker types.</p> : (
        <ul class="plain big">{list.data.map((w) => <li key={w.workerType}><a href={`#/workers/${enc(provisionerId)}/${enc(w.workerType)}`}>{w.workerType}</a> <span class="muted small">active {since(w.lastDateActive)}</span></li>)}</ul>
      ))}
    </div>
  );
}

/** Liveness is a worker's state as a badge: busy, idle or offline. */
function Liveness({ w }: { w: WorkerLoad }) {
  const label = livenessLabel(w);
  if (!label) return <span class="muted">?</span>;
  const cls = label === 'busy' ? 'state state-running' : label === 'idle' ? 'state state-completed' : 'muted';
  return <span class={`liveness ${cls}`}>{label === 'offline' ? 'offline' : `online, ${label}`}</span>;
}

const ORDER = { busy: 0, idle: 1, '': 2, offline: 3 };

function WorkerList({ provisionerId, workerType }: { provisionerId: string; workerType: string }) {
  const list = useAsync(() => listAll<WorkerSummary>('queue', `/provisioners/${enc(provisionerId)}/worker-types/${enc(workerType)}/workers`, 'workers', 5000), [provisionerId, workerType]);
  const workers = list.data && [...list.data].sort((a, b) => ORDER[livenessLabel(a)] - ORDER[livenessLabel(b)]);
  const online = workers?.filter((w) => w.online) ?? [];
  return (
    <div>
      <h1>{provisionerId}/{workerType}</h1>
      {crumbs(provisionerId, workerType)}
      <p class="lead">Task queue <QueueLink id={`${provisionerId}/${workerType}`} />
        {workers && <> · {online.length} online, {online.reduce((n, w) => n + (w.busy ?? 0), 0)} of {online.reduce((n, w) => n + (w.capacity ?? 0), 0)} slots busy</>}</p>
      <p class="small muted">Online: seen (asking for work or reclaiming a run) within the last long-poll and a minute, or holding a run whose claim lasts.
        Capacity: the most tasks it asked for at once since it came online.</p>
      <ErrorBox error={list.error} />
      {list.loading && !list.data && <Loading what="workers" />}
      {workers && (workers.length === 0 ? <p class="empty">No workers.</p> : (
        <div class="table-wrap">
          <table class="workers">
            <thead><tr><th>worker</th><th>state</th><th>slots</th><th>latest task</th><th>last seen</th><th>first claim</th><th>quarantine</th></tr></thead>
            <tbody>
              {workers.map((w) => (
                <tr key={`${w.workerGroup}/${w.workerId}`}>
                  <td><a class="mono" href={`#/worker/${enc(provisionerId)}/${enc(workerType)}/${enc(w.workerGroup)}/${enc(w.workerId)}`}>{w.workerGroup}/{w.workerId}</a></td>
                  <td><Liveness w={w} /></td>
                  <td class="slots">{w.online ? slots(w) : w.capacity ? `capacity ${w.capacity}` : ''}</td>
                  <td>{w.latestTask ? <TaskLink id={w.latestTask.taskId} /> : ''}</td>
                  <td>{since(w.lastDateActive)}</td>
                  <td>{fmtTime(w.firstClaim)}</td>
                  <td>{w.quarantineUntil && Date.parse(w.quarantineUntil) > Date.now() ? <span class="state state-exception">until {fmtTime(w.quarantineUntil)}</span> : ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ))}
    </div>
  );
}

/** TaskInfo is a run of a task with the task's name, for the worker's tables. */
interface TaskInfo { taskId: string; runId: number; name: string; run?: Run }

/** taskInfos loads the names and runs of tasks (each task once). */
async function taskInfos(list: { taskId: string; runId: number }[]): Promise<(TaskInfo | null)[]> {
  const loaded = new Map<string, Promise<[TaskStatus, TaskDefinition]>>();
  return Promise.all(list.map(async (t) => {
    let p = loaded.get(t.taskId);
    if (!p) {
      p = Promise.all([get<{ status: TaskStatus }>('queue', `/task/${enc(t.taskId)}/status`).then((r) => r.status), get<TaskDefinition>('queue', `/task/${enc(t.taskId)}`)]);
      loaded.set(t.taskId, p);
    }
    try {
      const [st, def] = await p;
      return { ...t, name: def.metadata?.name ?? t.taskId, run: st.runs[t.runId] };
    } catch {
      return null;
    }
  }));
}

export function WorkerPage({ provisionerId, workerType, workerGroup, workerId }: { provisionerId: string; workerType: string; workerGroup: string; workerId: string }) {
  const path = `/provisioners/${enc(provisionerId)}/worker-types/${enc(workerType)}/workers/${enc(workerGroup)}/${enc(workerId)}`;
  const w = useAsync(() => get<Worker>('queue', path), [path]);
  const creds = useSession();
  // The runs it holds now and its recent tasks, with their names, states
  // and durations, newest first (the worker record keeps only taskId and
  // runId).
  const tasks = useAsync(async () => {
    const running = w.data?.runningTasks ?? [];
    const recent = [...(w.data?.recentTasks ?? [])].reverse().slice(0, 20);
    const infos = await taskInfos([...running, ...recent]);
    return { running: infos.slice(0, running.length), recent: infos.slice(running.length) };
  }, [w.data]);
  const [hours, setHours] = useState('24');
  const [reason, setReason] = useState('');
  const quarantined = w.data?.quarantineUntil && Date.parse(w.data.quarantineUntil) > Date.now();
  return (
    <div>
      <h1 class="mono">{workerGroup}/{workerId}</h1>
      {crumbs(provisionerId, workerType)}
      <ErrorBox error={w.error} />
      {w.loading && !w.data && <Loading what="worker" />}
      {w.data && (
        <>
          <div class="grid">
            <Card title="Worker">
              <Kv pairs={[
                ['Task queue', <QueueLink id={`${provisionerId}/${workerType}`} />],
                ['First claim', fmtTime(w.data.firstClaim)],
                ['State', <><Liveness w={w.data} /> {w.data.online === false ? <span class="small muted">holds no run; last seen {since(w.data.lastDateActive) || 'never'}</span> : ''}</>],
                ['Slots', w.data.online === undefined ? '?' : slots(w.data)],
                ['Last seen', <>{since(w.data.lastDateActive) || 'never'} <span class="small muted">(asking for work or reclaiming a run)</span></>],
                ['Expires', fmtTime(w.data.expires)],
                ['Quarantined', quarantined ? `until ${fmtTime(w.data.quarantineUntil)}` : 'no'],
              ]} />
            </Card>
            <Card title="Quarantine">
              <p class="small muted">A quarantined worker gets no new tasks until the date passes; its running tasks go on.</p>
              {!creds ? <SignInForm label="Sign in to quarantine" /> : <>
              <div class="filters">
                <label>for <input class="filter narrow" name="hours" value={hours} onInput={(e) => setHours((e.target as HTMLInputElement).value)} /> hours</label>
                <input class="filter" name="reason" placeholder="why (shown to other operators)" value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
              </div>
              <div class="actions">
                <Action label="Quarantine" id="quarantine" run={async () => {
                  const until = new Date(Date.now() + Number(hours) * 3600e3).toISOString();
                  const r = await call<Worker>('queue', 'PUT', path, { quarantineUntil: until, ...(reason ? { quarantineInfo: reason } : {}) });
                  w.set(r);
                  return `Quarantined until ${fmtTime(r.quarantineUntil)}.`;
                }} />
                {quarantined && <Action label="Lift quarantine" id="unquarantine" run={async () => {
                  const r = await call<Worker>('queue', 'PUT', path, { quarantineUntil: new Date().toISOString(), quarantineInfo: 'lifted in the web UI' });
                  w.set(r);
                  return 'Quarantine lifted.';
                }} />}
              </div></>}
              {(w.data.quarantineDetails ?? []).length > 0 && (
                <ul class="plain small">{w.data.quarantineDetails!.map((d, i) => <li key={i}>{fmtTime(d.updatedAt)} {d.clientId}: until {fmtTime(d.quarantineUntil)} {d.quarantineInfo}</li>)}</ul>
              )}
            </Card>
          </div>
          <Card title={`Running now (${w.data.runningTasks?.length ?? 0})`}>
            {!w.data.runningTasks?.length ? <p class="empty">Nothing: it holds no run.</p> : !tasks.data ? <Loading what="running tasks" /> : (
              <table class="running-tasks">
                <thead><tr><th>task</th><th>run</th><th>started</th><th>running for</th><th>claim until</th></tr></thead>
                <tbody>{tasks.data.running.map((t, i) => t && (
                  <tr key={`${t.taskId}/${t.runId}/${i}`}>
                    <td><TaskLink id={t.taskId} label={t.name} /></td>
                    <td>{t.runId}</td>
                    <td class="small">{fmtTime(t.run?.started)}</td>
                    <td>{fmtDuration(runDuration(t.run, Date.now()))}</td>
                    <td class="small">{fmtTime(t.run?.takenUntil)}</td>
                  </tr>
                ))}</tbody>
              </table>
            )}
          </Card>
          <Card title={`Recent tasks (${w.data.recentTasks.length})`}>
            <p class="small muted">Newest first. A run is running on this worker while its claim lasts; a worker that stopped without resolving its runs leaves claims that run out, and the queue then retries them.</p>
            {w.data.recentTasks.length === 0 ? <p class="empty">None.</p> : !tasks.data ? <Loading what="recent tasks" /> : (
              <table class="recent-tasks">
                <thead><tr><th>task</th><th>run</th><th>state</th><th>started</th><th>duration</th></tr></thead>
                <tbody>{tasks.data.recent.map((t, i) => t && (
                  <tr key={`${t.taskId}/${t.runId}/${i}`}>
                    <td><TaskLink id={t.taskId} label={t.name} /></td>
                    <td>{t.runId}</td>
                    <td>{t.run ? (t.run.state === 'running' && !holds(t.run, workerGroup, workerId, Date.now()) ? 'claim ran out' : t.run.state) : '?'}{t.run?.reasonResolved ? ` (${t.run.reasonResolved})` : ''}</td>
                    <td class="small">{fmtTime(t.run?.started)}</td>
                    <td>{fmtDuration(runDuration(t.run, Date.now()))}{t.run?.state === 'running' ? ' so far' : ''}</td>
                  </tr>
                ))}</tbody>
              </table>
            )}
          </Card>
        </>
      )}
    </div>
  );
}
