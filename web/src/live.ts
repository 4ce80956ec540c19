// The live event stream (GET /api/live/v1/events): the queue's events as
// the Pulse exchanges carry them, pushed by the server. A signed-in user's
// stream carries a bewit (EventSource cannot send headers).
import { base } from './api';
import { signedUrl } from './hawk';
import { session } from './session';
import type { TaskStatus } from './types';

export interface LiveEvent {
  exchange: string;
  routingKey: string;
  /** The Pulse message body; null when it was too large to relay between replicas. */
  payload: { status?: TaskStatus; taskGroupId?: string } | null;
}

export type Selection = { taskId: string } | { taskGroupId: string } | { taskQueueId: string } | Record<string, never>;

/**
 * subscribe opens the stream for sel and calls onEvent for each event and
 * onReset when the stream (re)connects, when anything may have been
 * missed: the page should re-read what it shows then. Returns a function
 * that closes the stream.
 */
export function subscribe(sel: Selection, onEvent: (e: LiveEvent) => void, onReset: () => void, onState?: (connected: boolean) => void): () => void {
  let es: EventSource | null = null;
  let closed = false;
  let opened = false;
  const open = async () => {
    const q = new URLSearchParams(sel as Record<string, string>).toString();
    let url = `${base()}/api/live/v1/events${q ? '?' + q : ''}`;
    const creds = session.credentials();
    if (creds) url = await signedUrl(creds, url, 24 * 3600);
    if (closed) return;
    es = new EventSource(url);
    es.onopen = () => {
      onState?.(true);
      // The first connection follows the page's own first read; later
      // ones follow a gap.
      if (opened) onReset();
      opened = true;
    };
    es.onerror = () => {
      onState?.(false);
      // EventSource retries dropped connections itself, but gives up on
      // an error status (an expired bewit, a server answering 503 while
      // it drains): start over, freshly signed, a little later.
      if (es?.readyState === EventSource.CLOSED && !closed) {
        es = null;
        setTimeout(() => void open(), 5000);
      }
    };
    es.onmessage = (m) => {
      try {
        onEvent(JSON.parse(m.data) as LiveEvent);
      } catch {
        /* a malformed event is ignored */
      }
    };
  };
  void open();
  return () => {
    closed = true;
    es?.close();
  };
}

/** taskIdOf reads the taskId of a task event's routing key. */
export function taskIdOf(e: LiveEvent): string | undefined {
  const words = e.routingKey.split('.');
  return words.length >= 10 ? words[1] : undefined;
}
