// The index, secrets (names only) and hooks, read from those services'
// Taskcluster APIs (/api/index/v1, /api/secrets/v1, /api/hooks/v1).
import { useState } from 'preact/hooks';
import { ApiError, call, enc, get, listAll } from '../api';
import { Action, Card, ErrorBox, Kv, Loading, TaskLink, useAsync } from '../components';
import { fmtTime } from '../format';

/** Missing explains a service this hopper does not serve (yet). */
function Missing({ error, service }: { error: unknown; service: string }) {
  if (error instanceof ApiError && error.status === 404 && /not found/i.test(error.message)) {
    return <p class="notice">This hopper does not serve the {service} service (<code>/api/{service}/v1</code>).</p>;
  }
  return <ErrorBox error={error} />;
}

interface Namespace {
  namespace: string;
  name: string;
  expires: string;
}
interface IndexedTask {
  namespace: string;
  taskId: string;
  rank: number;
  data: unknown;
  expires: string;
}

export function IndexPage({ namespace }: { namespace: string }) {
  const ns = useAsync(() => listAll<Namespace>('index', `/namespaces${namespace ? '/' + enc(namespace) : ''}`, 'namespaces', 5000), [namespace]);
  const tasks = useAsync(() => listAll<IndexedTask>('index', `/tasks${namespace ? '/' + enc(namespace) : ''}`, 'tasks', 5000), [namespace]);
  const found = useAsync(() => (namespace ? get<IndexedTask>('index', `/task/${enc(namespace)}`).catch(() => null) : Promise.resolve(null)), [namespace]);
  const parts = namespace ? namespace.split('.') : [];
  const href = (p: string[]) => `#/index/${p.map(enc).join('/')}`;
  return (
    <div>
      <h1>Index</h1>
      <p class="crumbs"><a href="#/index">root</a>{parts.map((p, i) => <> <span class="sep">›</span> <a href={href(parts.slice(0, i + 1))}>{p}</a></>)}</p>
      {found.data && <Card title="Indexed task"><Kv pairs={[['Task', <TaskLink id={found.data.taskId} />], ['Rank', String(found.data.rank)], ['Expires', fmtTime(found.data.expires)]]} /></Card>}
      {ns.loading && !ns.data && <Loading what="namespaces" />}
      {ns.error ? <Missing error={ns.error} service="index" /> : (
        <div class="grid">
          <Card title={`Namespaces (${ns.data?.length ?? 0})`}>
            {ns.data && (ns.data.length === 0 ? <p class="empty">None.</p> : (
              <ul class="plain">{ns.data.map((n) => <li key={n.namespace}><a href={href(n.namespace.split('.'))}>{n.name}</a></li>)}</ul>
            ))}
          </Card>
          <Card title={`Tasks (${tasks.data?.length ?? 0})`}>
            <ErrorBox error={tasks.error} />
            {tasks.data && (tasks.data.length === 0 ? <p class="empty">None.</p> : (
              <ul class="plain">{tasks.data.map((t) => <li key={t.namespace}><span class="mono">{t.namespace.split('.').pop()}</span> → <TaskLink id={t.taskId} /> <span class="muted small">rank {t.rank}</span></li>)}</ul>
            ))}
          </Card>
        </div>
      )}
    </div>
  );
}

export function SecretsPage() {
  const list = useAsync(() => listAll<string>('secrets', '/secrets', 'secrets', 10000), []);
  return (
    <div>
      <h1>Secrets</h1>
      <p class="lead">Names only: this page never reads a secret's value.</p>
      {list.loading && !list.data && <Loading what="secret names" />}
      {list.error ? <Missing error={list.error} service="secrets" /> : list.data && (
        list.data.length === 0 ? <p class="empty">No secrets.</p> : <ul class="plain secrets">{list.data.map((n) => <li key={n} class="mono">{n}</li>)}</ul>
      )}
    </div>
  );
}

interface Hook {
  hookGroupId: string;
  hookId: string;
  metadata: { name: string; description: string; owner: string };
  schedule: string[];
  task: unknown;
  bindings?: { exchange: string; routingKeyPattern: string }[];
}
interface HookStatus {
  lastFire: { result: string; time?: string; taskId?: string; error?: unknown };
  nextScheduledDate?: string;
}

export function HooksPage({ hookGroupId, hookId }: { hookGroupId?: string; hookId?: string }) {
  if (hookGroupId && hookId) return <HookPage hookGroupId={hookGroupId} hookId={hookId} />;
  if (hookGroupId) return <HookGroup hookGroupId={hookGroupId} />;
  const groups = useAsync(() => get<{ groups: string[] }>('hooks', '/hooks'), []);
  return (
    <div>
      <h1>Hooks</h1>
      {groups.loading && !groups.data && <Loading what="hook groups" />}
      {groups.error ? <Missing error={groups.error} service="hooks" /> : groups.data && (
        groups.data.groups.length === 0 ? <p class="empty">No hooks.</p> : <ul class="plain big">{groups.data.groups.map((g) => <li key={g}><a href={`#/hooks/${enc(g)}`}>{g}</a></li>)}</ul>
      )}
    </div>
  );
}

function HookGroup({ hookGroupId }: { hookGroupId: string }) {
  const hooks = useAsync(() => get<{ hooks: Hook[] }>('hooks', `/hooks/${enc(hookGroupId)}`), [hookGroupId]);
  return (
    <div>
      <h1>{hookGroupId}</h1>
      <p class="crumbs"><a href="#/hooks">Hooks</a></p>
      {hooks.error ? <Missing error={hooks.error} service="hooks" /> : hooks.data && (
        <ul class="plain big">{hooks.data.hooks.map((h) => <li key={h.hookId}><a href={`#/hooks/${enc(hookGroupId)}/${enc(h.hookId)}`}>{h.hookId}</a> <span class="muted">{h.metadata.name}</span></li>)}</ul>
      )}
    </div>
  );
}

function HookPage({ hookGroupId, hookId }: { hookGroupId: string; hookId: string }) {
  const path = `/hooks/${enc(hookGroupId)}/${enc(hookId)}`;
  const hook = useAsync(() => get<Hook>('hooks', path), [path]);
  const status = useAsync(() => get<HookStatus>('hooks', `${path}/status`), [path]);
  const fires = useAsync(() => listAll<{ taskId: string; taskCreateTime: string; result: string; firedBy: string; error?: string }>('hooks', `${path}/last-fires`, 'lastFires', 100), [path]);
  const [payload, setPayload] = useState('{}');
  return (
    <div>
      <h1>{hookGroupId}/{hookId}</h1>
      <p class="crumbs"><a href="#/hooks">Hooks</a> <span class="sep">›</span> <a href={`#/hooks/${enc(hookGroupId)}`}>{hookGroupId}</a></p>
      {hook.error && <Missing error={hook.error} service="hooks" />}
      {hook.data && (
        <div class="grid">
          <Card title={hook.data.metadata.name}>
            <Kv pairs={[
              ['Description', hook.data.metadata.description], ['Owner', hook.data.metadata.owner],
              ['Schedule', hook.data.schedule.join(', ') || 'none'],
              ['Last fire', status.data ? `${status.data.lastFire.result}${status.data.lastFire.time ? ' at ' + fmtTime(status.data.lastFire.time) : ''}` : ''],
              ['Next scheduled', fmtTime(status.data?.nextScheduledDate)],
            ]} />
          </Card>
          <Card title="Trigger">
            <textarea class="definition mono" rows={4} value={payload} onInput={(e) => setPayload((e.target as HTMLTextAreaElement).value)} aria-label="trigger payload (JSON)" />
            <div class="actions">
              <Action label="Trigger hook" id="trigger-hook" run={async () => {
                const r = await call<{ status?: { taskId: string } }>('hooks', 'POST', `${path}/trigger`, JSON.parse(payload));
                return r.status ? `Created task ${r.status.taskId}.` : 'Triggered (the hook made no task).';
              }} />
            </div>
          </Card>
        </div>
      )}
      <Card title="Last fires">
        <ErrorBox error={fires.error} />
        {fires.data && (fires.data.length === 0 ? <p class="empty">None.</p> : (
          <ul class="plain">{fires.data.map((f) => <li key={f.taskId}><TaskLink id={f.taskId} /> {f.result} <span class="muted small">{fmtTime(f.taskCreateTime)} by {f.firedBy}</span></li>)}</ul>
        ))}
      </Card>
      {hook.data && <Card title="Task template"><details class="payload"><summary>hook task (JSON-e template)</summary><pre>{JSON.stringify(hook.data.task, null, 2)}</pre></details></Card>}
    </div>
  );
}
