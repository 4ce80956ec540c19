// hopper's web console: a Preact single page over the Taskcluster APIs of
// the same origin, routed by URL fragment (#/task/<taskId>, …) so that
// links work on any hopper without server-side routes.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { SignIn } from './signin';
import { TaskPage } from './pages/task';
import { GroupPage } from './pages/group';
import { HomePage, QueuePage } from './pages/queues';
import { TasksPage } from './pages/tasks';
import { WorkersPage, WorkerPage } from './pages/workers';
import { CreatePage } from './pages/create';
import { IndexPage, SecretsPage, HooksPage } from './pages/services';
import { CliSignInPage } from './pages/clisignin';
import { DeliveryPage, GithubPage } from './pages/github';
import { AuditPage } from './pages/audit';
import { PoolsPage } from './pages/pools';
import { ProfilePage } from './pages/profile';
import { ThirdPartyPage } from './pages/thirdparty';
import { startSignOn } from './login';

const SLUGID = /^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$/;
const TASK_QUEUE_ID = /^[a-zA-Z0-9_-]{1,38}\/[a-z]([-a-z0-9]{0,36}[a-z0-9])?$/;

/** route is the fragment split into decoded path words and its query. */
export function parseRoute(hash: string): { words: string[]; query: URLSearchParams } {
  const [path, q] = hash.replace(/^#\/?/, '').split('?');
  return { words: path.split('/').filter(Boolean).map((w) => decodeURIComponent(w)), query: new URLSearchParams(q ?? '') };
}

function useHash(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = () => setHash(location.hash);
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
}

function Page({ hash }: { hash: string }) {
  const { words, query } = parseRoute(hash);
  const [first, ...rest] = words;
  switch (first) {
    case undefined:
      return <HomePage />;
    case 'task':
      return <TaskPage key={rest[0]} taskId={rest[0]} />;
    case 'group':
      return <GroupPage key={rest[0]} taskGroupId={rest[0]} view={rest[1] ?? 'list'} />;
    case 'queue':
      return <QueuePage key={rest[0]} taskQueueId={rest[0]} />;
    case 'tasks':
      return <TasksPage query={query} />;
    case 'workers':
      return <WorkersPage provisionerId={rest[0]} workerType={rest[1]} />;
    case 'worker':
      return <WorkerPage provisionerId={rest[0]} workerType={rest[1]} workerGroup={rest[2]} workerId={rest[3]} />;
    case 'create':
      return <CreatePage key={hash} />;
    case 'retrigger':
      return <CreatePage key={hash} fromTaskId={rest[0]} />;
    case 'index':
      return <IndexPage namespace={rest.join('.')} />;
    case 'secrets':
      return <SecretsPage />;
    case 'hooks':
      return <HooksPage hookGroupId={rest[0]} hookId={rest[1]} />;
    case 'pools':
      return <PoolsPage key={hash} workerPoolId={rest.length ? rest.join('/') : undefined} />;
    case 'github':
      return <GithubPage key={hash} org={rest[0]} repo={rest[1]} />;
    case 'audit':
      return <AuditPage key={hash} kind={rest[0]} id={rest[1]} />;
    case 'delivery':
      return <DeliveryPage key={hash} host={rest[0]} deliveryId={rest[1]} />;
    case 'profile':
      return <ProfilePage />;
    case 'third-party':
      return <ThirdPartyPage key={hash} query={query} />;
    case 'auth':
      if (rest[0] === 'clients' && rest[1] === 'create') return <CliSignInPage query={query} />;
      break;
  }
  return <div class="error">No page at {hash}.</div>;
}

function Search() {
  const [q, setQ] = useState('');
  const go = (e: Event) => {
    e.preventDefault();
    const v = q.trim();
    if (SLUGID.test(v)) location.hash = `#/task/${v}`;
    else if (TASK_QUEUE_ID.test(v)) location.hash = `#/queue/${encodeURIComponent(v)}`;
    else if (v) location.hash = `#/index/${v.split('.').map(encodeURIComponent).join('/')}`;
  };
  return (
    <form class="search" role="search" onSubmit={go}>
      <input type="search" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} spellcheck={false}
        placeholder="taskId, provisioner/workerType or index path" aria-label="Go to a task, task queue or index path" />
      <button type="submit">Go</button>
    </form>
  );
}

const NAV: [string, string][] = [
  ['', 'Task queues'], ['tasks', 'Tasks'], ['workers', 'Workers'], ['pools', 'Pools'], ['create', 'Create task'],
  ['index', 'Index'], ['secrets', 'Secrets'], ['hooks', 'Hooks'], ['github', 'Builds'], ['audit', 'Audit'],
];

function App() {
  const hash = useHash();
  const current = parseRoute(hash).words[0] ?? '';
  return (
    <>
      <header class="topbar">
        <a class="brand" href="#/"><img src="favicon.svg" alt="" width={22} height={22} /><span>hopper</span></a>
        <nav>
          {NAV.map(([key, label]) => (
            <a key={key} href={`#/${key}`} class={current === key ? 'active' : ''}>{label}</a>
          ))}
        </nav>
        <Search />
        <SignIn />
      </header>
      <main id="main">
        <Page hash={hash} />
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
void startSignOn();
