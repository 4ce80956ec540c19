// Create a task from YAML or JSON, or retrigger one: a new task from an
// existing task's definition, with its times moved to now, edited first.
import { useEffect, useState } from 'preact/hooks';
import { call, enc, get } from '../api';
import { Card, ErrorBox, TaskLink, errorText } from '../components';
import { useSession } from '../signin';
import { exampleDefinition, parseDefinition, retriggerText, withDefaults } from '../taskdef';
import type { TaskDefinition, TaskStatus } from '../types';

export function CreatePage({ fromTaskId }: { fromTaskId?: string }) {
  const creds = useSession();
  const [text, setText] = useState(fromTaskId ? '' : exampleDefinition);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [error, setError] = useState('');
  const [created, setCreated] = useState<TaskStatus | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (!fromTaskId) return;
    get<TaskDefinition>('queue', `/task/${enc(fromTaskId)}`).then((def) => setText(retriggerText(def, Date.now())), setLoadError);
  }, [fromTaskId]);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError('');
    setCreated(null);
    setBusy(true);
    try {
      const { taskId, def } = withDefaults(parseDefinition(text), Date.now(), creds?.clientId ?? 'anonymous');
      const r = await call<{ status: TaskStatus }>('queue', 'PUT', `/task/${enc(taskId)}`, def);
      setCreated(r.status);
    } catch (err) {
      setError(errorText(err));
    }
    setBusy(false);
  };
  return (
    <div>
      <h1>{fromTaskId ? 'Retrigger' : 'Create a task'}</h1>
      {fromTaskId && <p class="lead">A new task from the definition of <TaskLink id={fromTaskId} />, with a new taskId and its times moved to now. Edit it, then create it.</p>}
      {!creds && <p class="notice">Creating a task needs credentials with <code>queue:create-task:…</code> scopes: sign in first (top right).</p>}
      <ErrorBox error={loadError} />
      <Card>
        <form onSubmit={submit} class="create">
          <textarea name="definition" class="definition mono" rows={22} spellcheck={false} value={text} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} aria-label="task definition (YAML or JSON)" />
          <div class="actions">
            <button type="submit" disabled={busy} id="create-task">{busy ? 'Creating…' : 'Create task'}</button>
            {error && <span class="action-error" role="alert">{error}</span>}
            {created && <span class="action-ok" role="status">Created <TaskLink id={created.taskId} />: {created.state}.</span>}
          </div>
        </form>
      </Card>
    </div>
  );
}
