// What the console can truthfully say about a worker from the Queue API:
// when it last asked for work, and what it holds now.
import type { Run } from './types';

/**
 * POLL_WINDOW is how long after its last claimWork a worker still counts
 * as asking for work: the queue rewrites lastDateActive at most once a
 * minute per worker, and an idle worker polls at least every long-poll
 * (20 s). A worker whose slots are all busy does not poll (it reclaims),
 * so "not asking" alone never means "stopped".
 */
export const POLL_WINDOW = 90e3;

/** asking reports whether the worker asked for work within POLL_WINDOW. */
export function asking(lastDateActive: string | undefined, now: number): boolean {
  const t = Date.parse(lastDateActive ?? '');
  return Number.isFinite(t) && now - t <= POLL_WINDOW;
}

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
