// Small components shared by the pages.
import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';
import { STATES } from './types';

/** useAsync runs load now and whenever deps change; reload runs it again. */
export function useAsync<T>(load: () => Promise<T>, deps: unknown[]): { data?: T; error?: unknown; loading: boolean; reload: () => Promise<void>; set: (t: T) => void } {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const gen = useRef(0);
  const reload = useCallback(async () => {
    const mine = ++gen.current;
    try {
      const data = await load();
      if (gen.current === mine) setState({ data, loading: false });
    } catch (error) {
      if (gen.current === mine) setState((s) => ({ data: s.data, error, loading: false }));
    }
  }, deps); // eslint-disable-line react-hooks/exhaustive-deps
  useEffect(() => {
    setState({ loading: true });
    void reload();
    return () => {
      gen.current++;
    };
  }, [reload]);
  return { ...state, reload, set: (data: T) => setState({ data, loading: false }) };
}

export function errorText(err: unknown): string {
  if (err instanceof ApiError) return `HTTP ${err.status} ${err.code}: ${err.summary}`;
  return String((err as Error)?.message ?? err);
}

/** ErrorBox shows an error as Taskcluster worded it. */
export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  return <div class="error" role="alert">{errorText(error)}</div>;
}

/**
 * Badge shows a state in its colour; label, when given, is the word shown
 * (a build's "failure" in the colour of a failed task, said once).
 */
export function Badge({ state, label }: { state?: string; label?: string }) {
  const known = (STATES as string[]).includes(state ?? '');
  return <span class={`state state-${known ? state : 'unknown'}`}>{label ?? state ?? '?'}</span>;
}

export function Loading({ what }: { what: string }) {
  return <p class="loading">Loading {what}…</p>;
}

export function Card({ title, children, actions }: { title?: ComponentChildren; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="card">
      {(title || actions) && (
        <div class="card-head">
          {title && <h2>{title}</h2>}
          {actions && <div class="card-actions">{actions}</div>}
        </div>
      )}
      {children}
    </section>
  );
}

export function Kv({ pairs }: { pairs: [string, ComponentChildren][] }) {
  return (
    <dl class="kv">
      {pairs.filter(([, v]) => v !== null && v !== undefined && v !== '').map(([k, v]) => [<dt key={k + ':k'}>{k}</dt>, <dd key={k + ':v'}>{v}</dd>])}
    </dl>
  );
}

export const TaskLink = ({ id, label }: { id: string; label?: string }) => <a class={label ? '' : 'mono'} href={`#/task/${id}`}>{label || id}</a>;
export const GroupLink = ({ id }: { id: string }) => <a class="mono" href={`#/group/${id}`}>{id}</a>;
export const QueueLink = ({ id }: { id: string }) => <a class="mono" href={`#/queue/${encodeURIComponent(id)}`}>{id}</a>;

/** safeHref lets through http(s) URLs only; others give no link. */
export function safeHref(url: string): string | undefined {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Action is a button that runs an operation within the user's scopes and
 * shows its outcome: a confirmation line, or the queue's refusal as it
 * came (e.g. "HTTP 403 InsufficientScopes: …").
 */
export function Action({ label, run, confirm, danger, id }: { label: string; run: () => Promise<string | void>; confirm?: string; danger?: boolean; id?: string }) {
  const [phase, setPhase] = useState<'idle' | 'confirm' | 'busy'>('idle');
  const [result, setResult] = useState<{ ok?: string; error?: unknown }>({});
  const go = async () => {
    setPhase('busy');
    setResult({});
    try {
      const ok = await run();
      setResult({ ok: ok || `${label}: done.` });
    } catch (error) {
      setResult({ error });
    }
    setPhase('idle');
  };
  return (
    <span class="action" data-action={id ?? label}>
      {phase === 'confirm' ? (
        <>
          <span class="confirm-text">{confirm}</span>
          <button class={danger ? 'danger' : ''} onClick={go}>Yes, {label.toLowerCase()}</button>
          <button class="secondary" onClick={() => setPhase('idle')}>No</button>
        </>
      ) : (
        <button class={danger ? 'danger' : ''} disabled={phase === 'busy'} onClick={() => (confirm ? setPhase('confirm') : go())}>
          {phase === 'busy' ? `${label}…` : label}
        </button>
      )}
      {result.ok && <span class="action-ok" role="status">{result.ok}</span>}
      {result.error !== undefined && <span class="action-error" role="alert">{errorText(result.error)}</span>}
    </span>
  );
}

/**
 * VirtualList renders only the rows in view (plus a margin), so a list of
 * 10,000 rows costs what a screenful does.
 */
export function VirtualList<T>({ items, rowHeight, height, row, class: cls }: { items: T[]; rowHeight: number; height: number; row: (item: T, index: number) => JSX.Element; class?: string }) {
  const [top, setTop] = useState(0);
  const first = Math.max(0, Math.floor(top / rowHeight) - 10);
  const last = Math.min(items.length, Math.ceil((top + height) / rowHeight) + 10);
  const shown: JSX.Element[] = [];
  for (let i = first; i < last; i++) {
    shown.push(
      <div class="vrow" key={i} style={{ top: `${i * rowHeight}px`, height: `${rowHeight}px` }}>
        {row(items[i], i)}
      </div>,
    );
  }
  return (
    <div class={`vlist ${cls ?? ''}`} style={{ height: `${Math.min(height, items.length * rowHeight + 2)}px` }} onScroll={(e) => setTop((e.currentTarget as HTMLElement).scrollTop)} data-rows={items.length}>
      <div class="vspace" style={{ height: `${items.length * rowHeight}px` }}>{shown}</div>
    </div>
  );
}

/** Tabs are in-page links that switch a view. */
export function Tabs({ tabs, current }: { tabs: [string, string, string][]; current: string }) {
  return (
    <nav class="tabs">
      {tabs.map(([key, label, href]) => (
        <a key={key} href={href} class={key === current ? 'active' : ''}>{label}</a>
      ))}
    </nav>
  );
}
