// The pools page's pure parts: a pool's capacity bounds, and a pool
// definition read from YAML or JSON into createWorkerPool's body.
import { parse } from 'yaml';

export type PoolConfig = Record<string, unknown>;

/** bounds reads a pool's min and max capacity ("–" for a static pool). */
export function bounds(p: { config?: PoolConfig }): { min: string; max: string } {
  const c = p.config ?? {};
  const num = (v: unknown) => (typeof v === 'number' ? String(v) : '–');
  return { min: num(c.minCapacity), max: num(c.maxCapacity) };
}

/** poolDocument reads a pool written in YAML (or JSON). */
export function poolDocument(text: string): { id: string; body: Record<string, unknown> } {
  const doc = parse(text) as Record<string, unknown> | null;
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new Error('A worker pool is a YAML mapping.');
  const { workerPoolId, created, lastModified, ...rest } = doc;
  void created; void lastModified;
  for (const k of ['currentCapacity', 'requestedCount', 'runningCount', 'stoppingCount', 'stoppedCount', 'requestedCapacity', 'runningCapacity', 'stoppingCapacity', 'stoppedCapacity']) delete rest[k];
  if (typeof workerPoolId !== 'string' || !workerPoolId.includes('/')) throw new Error('workerPoolId: <provisionerId>/<workerType> is missing.');
  return { id: workerPoolId, body: rest };
}


/**
 * workerBadge is the colour a worker's own state is shown in (the word
 * shown is the state itself: a worker is not a task).
 */
export function workerBadge(state: string): string {
  return ({ running: 'running', requested: 'pending', stopping: 'exception', stopped: 'exception' } as Record<string, string>)[state] ?? 'unknown';
}
