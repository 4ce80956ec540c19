// What the console can truthfully say about a worker from the Queue API:
// hopper's worker views say whether it is online, its capacity and its
// busy slots; the runs of its recent tasks say which it still holds.
import type { Run, WorkerLoad } from './types';

/** runDuration is how long a run took, or has run so far (ms), or NaN. */
export function runDuration(run: Run | undefined, now: number): number {
  if (!run?.started) return NaN;
  const end = run.resolved ? Date.parse(run.resolved) : now;
  return end - Date.parse(run.started);
}

/**
 * holds reports whether the run is one the worker is running now: its run
 * is running, on this worker, and its claim has not run out (a worker that
 * died leaves runs whose claims run out; the queue then resolves them).
 */
export function holds(run: Run | undefined, workerGroup: string, workerId: string, now: number): boolean {
  return !!run && run.state === 'running' && run.workerGroup === workerGroup && run.workerId === workerId &&
    Date.parse(run.takenUntil ?? '') > now;
}

/**
 * slots says how many of its slots a worker uses ("1 of 2 busy"); a
 * capacity of 0 is one the queue never saw it ask for (a Taskcluster
 * deployment does not say). Offline workers use none.
 */
export function slots(w: WorkerLoad): string {
  const busy = w.busy ?? 0;
  if (!w.capacity) return busy ? `${busy} busy` : 'idle';
  return busy ? `${busy} of ${w.capacity} busy` : `0 of ${w.capacity} busy`;
}

/** livenessLabel is a worker's state in a word: busy, idle, offline, or '' when the server does not say. */
export function livenessLabel(w: WorkerLoad): '' | 'busy' | 'idle' | 'offline' {
  if (w.online === undefined) return '';
  if (!w.online) return 'offline';
  return (w.busy ?? 0) > 0 ? 'busy' : 'idle';
}
