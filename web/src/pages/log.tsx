// The log of a task's latest run: streamed from the worker's live-log
// server while the run is running, the uploaded backing log once it is
// resolved.
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, enc, get } from '../api';
import { errorText } from '../components';
import type { TaskDefinition, TaskStatus } from '../types';

const MAX_CHARS = 2_000_000;
/** How long after a run ended its log may still be on its way. */
const UPLOAD_WAIT_MS = 60_000;

interface Content {
  storageType: string;
  url?: string;
  reason?: string;
  message?: string;
}

function logNames(task: TaskDefinition): { live: string; backing: string } {
  const logs = (task.payload?.logs ?? {}) as { live?: string; backing?: string };
  return { live: logs.live || 'public/logs/live.log', backing: logs.backing || 'public/logs/live_backing.log' };
}

export function LogPanel({ taskId, status, task }: { taskId: string; status: TaskStatus; task: TaskDefinition }) {
  const run = status.runs[status.runs.length - 1];
  const phase = !run ? 'none' : run.state === 'pending' ? 'pending' : run.state === 'running' ? 'live' : 'final';
  const key = `${run?.runId}:${phase}`;
  const [msg, setMsg] = useState('');
  const [text, setText] = useState('');
  const [raw, setRaw] = useState<string | undefined>();
  const pre = useRef<HTMLPreElement>(null);
  // The run whose text is shown: when it ends, what was streamed stays on
  // screen until the uploaded log replaces it.
  const shownRun = useRef<number | undefined>(undefined);

  useEffect(() => {
    if (shownRun.current !== run?.runId) setText('');
    shownRun.current = run?.runId;
    setRaw(undefined);
    if (phase === 'none') return setMsg('No runs yet, so no log.');
    if (phase === 'pending') return setMsg(`Run ${run.runId} is pending: the log appears once a worker starts it.`);
    const ctl = new AbortController();
    const names = logNames(task);
    const content = (name: string) => get<Content>('queue', `/task/${enc(taskId)}/runs/${run.runId}/artifact-content/${name.split('/').map(enc).join('/')}`);
    const read = async (url: string, live: boolean) => {
      setRaw(url);
      const res = await fetch(url, { signal: ctl.signal, cache: 'no-store', credentials: 'omit' });
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let all = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        all += dec.decode(value, { stream: true });
        if (all.length > MAX_CHARS) all = all.slice(-MAX_CHARS);
        if (live) setText(all);
      }
      setText(all + dec.decode());
    };
    // follow streams a live log and, when the stream drops (a replica
    // restarting, the worker's tunnel moving), asks for the rest with
    // Range: bytes=N-, so nothing is lost or shown twice; a server that
    // answers 200 instead sends it all again, and what was shown is
    // skipped.
    const follow = async (url: string) => {
      const dec = new TextDecoder();
      let all = '';
      let received = 0;
      for (let attempt = 0; !ctl.signal.aborted; attempt++) {
        try {
          const res = await fetch(url, {
            signal: ctl.signal, cache: 'no-store', credentials: 'omit',
            headers: received > 0 ? { Range: `bytes=${received}-` } : {},
          });
          if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
          let skip = res.status === 206 ? 0 : received;
          const reader = res.body.getReader();
          for (;;) {
            const { done, value } = await reader.read();
            if (done) {
              setText(all + dec.decode());
              return;
            }
            let chunk = value;
            if (skip > 0) {
              const cut = Math.min(skip, chunk.length);
              chunk = chunk.subarray(cut);
              skip -= cut;
            }
            if (chunk.length === 0) continue;
            received += chunk.length;
            all += dec.decode(chunk, { stream: true });
            if (all.length > MAX_CHARS) all = all.slice(-MAX_CHARS);
            setText(all);
            attempt = 0;
          }
        } catch (e) {
          if (ctl.signal.aborted || attempt >= 30) throw e;
          setMsg(`The live log of run ${run.runId} dropped; resuming…`);
          await new Promise((r) => setTimeout(r, 2000));
          setMsg(`Streaming the live log of run ${run.runId}…`);
        }
      }
    };
    void (async () => {
      try {
        if (phase === 'live') {
          let c: Content | undefined;
          while (!ctl.signal.aborted) {
            try {
              c = await content(names.live);
              break;
            } catch (e) {
              if (!(e instanceof ApiError && e.status === 404)) throw e;
              setMsg(`Run ${run.runId} is running; waiting for the worker to publish ${names.live}…`);
              await new Promise((r) => setTimeout(r, 2000));
            }
          }
          if (!c?.url) return;
          setMsg(`Streaming the live log of run ${run.runId}…`);
          await follow(c.url);
          setMsg('The live log ended; the full log follows once the run is resolved.');
          return;
        }
        // A worker uploads the log of a run that ends under it (completed,
        // failed, or cancelled: a run resolved exception still takes its
        // log) a moment after the queue resolved it: until then keep what
        // was streamed and look again.
        const resolvedAt = run.resolved ? Date.parse(run.resolved) : NaN;
        const waitUntil = (Number.isNaN(resolvedAt) ? Date.now() : resolvedAt) + UPLOAD_WAIT_MS;
        let last: unknown;
        // readable is where the content of name can be read, if it can.
        const readable = (c: Content | undefined) => (c && c.storageType !== 'reference' && c.storageType !== 'error' ? c.url : undefined);
        for (;;) {
          let backingAbsent = false;
          for (const name of [names.backing, names.live]) {
            try {
              const c = await content(name);
              if (c.storageType === 'error') {
                setMsg(`The worker could not upload ${name}: ${c.reason ?? ''} ${c.message ?? ''}`);
                return;
              }
              let url = readable(c);
              if (!url) {
                last = new Error(`${name} points at a live-log server that is gone`);
                continue;
              }
              let shown = name;
              if (name !== names.backing && backingAbsent) {
                // A worker uploads the backing log, then makes the live
                // log a link to it (which the queue resolves): both can
                // happen between asking for the backing log and asking
                // for this one. Ask again, so the log shown is named for
                // what it is.
                const backing = readable(await content(names.backing).catch(() => undefined));
                if (backing) [url, shown] = [backing, names.backing];
              }
              setMsg(`Log of run ${run.runId} (${shown}).`);
              await read(url, false);
              return;
            } catch (e) {
              last = e;
              if (name === names.backing && e instanceof ApiError && e.status === 404) backingAbsent = true;
            }
          }
          if (ctl.signal.aborted || Date.now() > waitUntil) break;
          setMsg(`Run ${run.runId} ended (${run.state}${run.reasonResolved ? '/' + run.reasonResolved : ''}); waiting for the worker to upload its log…`);
          await new Promise((r) => setTimeout(r, 1000));
        }
        setMsg(last instanceof ApiError && last.status === 404 ? `Run ${run.runId} has no log artifact.` : `No log: ${errorText(last)}`);
      } catch (e) {
        if (!ctl.signal.aborted) setMsg(`The log cannot be read here (${errorText(e)}).`);
      }
    })();
    return () => ctl.abort();
  }, [taskId, key]);

  useEffect(() => {
    const el = pre.current;
    if (el && phase === 'live') el.scrollTop = el.scrollHeight;
  }, [text]);

  return (
    <div>
      <div class="log-head"><p class="muted">{msg}</p>{raw && <a href={raw} target="_blank" rel="noopener noreferrer">open raw</a>}</div>
      <pre class="log" ref={pre} tabIndex={0}>{text}</pre>
    </div>
  );
}
