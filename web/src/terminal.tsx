// A shell inside a running interactive task: an xterm.js terminal joined
// to hopper's /api/interactive/v1/task/<taskId>/shell WebSocket. Binary
// messages carry the terminal's bytes both ways; text messages carry
// {"resize":{cols,rows}} to the task and {"exit":N} or {"error":"…"} back.
import { useEffect, useRef, useState } from 'preact/hooks';
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { base, enc } from './api';
import { signedUrl } from './hawk';
import { session } from './session';

/** shellUrl is the WebSocket URL of a task's shell, signed with a bewit when signed in. */
export async function shellUrl(taskId: string): Promise<string> {
  const url = `${base()}/api/interactive/v1/task/${enc(taskId)}/shell`;
  const creds = session.credentials();
  const signed = creds ? await signedUrl(creds, url, 60) : url;
  return signed.replace(/^http/, 'ws');
}

type Phase = 'closed' | 'connecting' | 'open' | 'ended';

/** ShellPanel offers a shell in the task and, once opened, shows its terminal. */
export function ShellPanel({ taskId, taskQueueId }: { taskId: string; taskQueueId: string }) {
  const [phase, setPhase] = useState<Phase>('closed');
  const [note, setNote] = useState('');
  const box = useRef<HTMLDivElement>(null);
  const stop = useRef<() => void>(() => {});
  useEffect(() => () => stop.current(), []);

  const open = async () => {
    setPhase('connecting');
    setNote('');
    const term = new Terminal({ cursorBlink: true, convertEol: false, fontSize: 13, scrollback: 5000 });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(box.current!);
    fit.fit();
    const ws = new WebSocket(await shellUrl(taskId));
    ws.binaryType = 'arraybuffer';
    const encoder = new TextEncoder();
    let ended = false;
    const sendSize = () => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ resize: { cols: term.cols, rows: term.rows } }));
    };
    const onWindow = () => fit.fit();
    const observer = new ResizeObserver(onWindow);
    observer.observe(box.current!);
    window.addEventListener('resize', onWindow);
    const input = term.onData((d) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(d));
    });
    const resize = term.onResize(sendSize);
    // Copy and paste with Ctrl+Shift+C and Ctrl+Shift+V (plain Ctrl+C is
    // the shell's interrupt); the browser's own copy of a selection and
    // paste also work.
    term.attachCustomKeyEventHandler((e) => {
      if (e.type !== 'keydown' || !e.ctrlKey || !e.shiftKey) return true;
      if (e.code === 'KeyC' && term.hasSelection()) {
        void navigator.clipboard?.writeText(term.getSelection());
        return false;
      }
      if (e.code === 'KeyV') {
        void navigator.clipboard?.readText().then((t) => term.paste(t));
        return false;
      }
      return true;
    });
    ws.onopen = () => {
      setPhase('open');
      sendSize();
      term.focus();
    };
    ws.onmessage = (m) => {
      if (typeof m.data !== 'string') {
        term.write(new Uint8Array(m.data as ArrayBuffer));
        return;
      }
      try {
        const c = JSON.parse(m.data) as { exit?: number; error?: string };
        if (c.error) setNote(c.error);
        if (c.exit !== undefined) {
          ended = true;
          setNote(`The shell exited with code ${c.exit}.`);
        }
      } catch {
        /* not a control message */
      }
    };
    ws.onclose = (e) => {
      setPhase('ended');
      if (!ended && e.code !== 1000) {
        setNote((n) => n || `The shell could not open or was closed (${e.code}${e.reason ? `: ${e.reason}` : ''}): a shell needs the scope interactive:open-shell:${taskQueueId} and a running interactive task.`);
      }
      term.options.disableStdin = true;
    };
    stop.current = () => {
      observer.disconnect();
      window.removeEventListener('resize', onWindow);
      input.dispose();
      resize.dispose();
      ws.close();
      term.dispose();
    };
  };

  return (
    <div class="shell-panel">
      <div class="actions">
        {phase === 'closed' && <button id="open-shell" onClick={() => void open()}>Open a shell</button>}
        {phase === 'connecting' && <span class="empty">Connecting…</span>}
        {phase === 'open' && <span class="hint">A shell in the task's sandbox. Copy: select (or Ctrl+Shift+C); paste: Ctrl+Shift+V.</span>}
        {phase === 'ended' && <button id="reopen-shell" onClick={() => { stop.current(); setPhase('closed'); }}>Close</button>}
        {note && <span class="shell-note" role="status">{note}</span>}
      </div>
      <div class="terminal" ref={box} />
    </div>
  );
}
