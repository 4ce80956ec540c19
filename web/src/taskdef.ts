// Task definitions as people write them: YAML or JSON text in, a
// createTask body out, with the defaults `hopper task create` fills in.
import { parse, stringify } from 'yaml';
import type { TaskDefinition } from './types';

export const DEFAULT_TASK_QUEUE = 'hopper/default';

/** slugid returns a new v4 slugid (22 characters, URL-safe, first bit clear). */
export function slugid(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  b[0] &= 0x7f; // "nice" slugids never start with "-"
  let s = '';
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').slice(0, 22);
}

/** parseDefinition reads YAML (JSON is YAML too) into an object. */
export function parseDefinition(text: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    throw new Error(`The definition is neither YAML nor JSON: ${(e as Error).message}`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new Error('The definition must be a mapping (an object) of task fields.');
  return doc as Record<string, unknown>;
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * withDefaults fills in what `hopper task create` fills in: created (now),
 * deadline (now + 24 h), the task queue, and metadata. It returns the
 * taskId the definition names under a top-level taskId key (which it
 * removes), or a new one.
 */
export function withDefaults(doc: Record<string, unknown>, now: number, owner: string): { taskId: string; def: TaskDefinition } {
  const d: Record<string, unknown> = { ...doc };
  const taskId = typeof d.taskId === 'string' && d.taskId ? d.taskId : slugid();
  delete d.taskId;
  d.created ??= iso(now);
  d.deadline ??= iso(now + 24 * 3600 * 1000);
  if (!d.taskQueueId && !(d.provisionerId && d.workerType)) d.taskQueueId = DEFAULT_TASK_QUEUE;
  d.payload ??= {};
  const md = { ...((d.metadata as Record<string, unknown>) ?? {}) };
  md.name ??= 'created in the hopper web UI';
  md.description ??= 'Created from the hopper web UI.';
  md.owner ??= owner;
  md.source ??= `${location.origin}/ui/`;
  d.metadata = md;
  return { taskId, def: d as TaskDefinition };
}

/**
 * retriggerText is the YAML a retrigger starts from: the task's definition
 * with its times moved to now (keeping the deadline's and expiry's
 * distance from created) and a new taskId, ready for edits.
 */
export function retriggerText(def: TaskDefinition, now: number): string {
  const created = Date.parse(def.created);
  const shift = (t?: string) => (t ? iso(now + (Date.parse(t) - created)) : undefined);
  const copy: Record<string, unknown> = { taskId: slugid(), ...def, created: iso(now), deadline: shift(def.deadline) };
  if (def.expires) copy.expires = shift(def.expires);
  else delete copy.expires;
  return stringify(copy, { lineWidth: 0 });
}

export const exampleDefinition = `# A task: YAML or JSON. taskId, created, deadline, taskQueueId and
# metadata are filled in when missing.
taskQueueId: ${DEFAULT_TASK_QUEUE}
payload:
  command: [["sh", "-c", "echo hello from the web UI"]]
  maxRunTime: 60
metadata:
  name: hello
  description: says hello
`;

/**
 * interactiveCopy is the definition of an interactive copy of a task, as
 * `hopper task interactive` makes it: features.interactive on, no routes
 * (no index entries, notifications or forge statuses), no dependencies, no
 * retries, created now with the original's spans to the deadline (at
 * least an hour) and expiry (at least a day, never before the deadline).
 */
export function interactiveCopy(def: TaskDefinition, now: number): TaskDefinition {
  const created = Date.parse(def.created);
  const span = (t: string | undefined, least: number) => {
    const d = t ? Date.parse(t) - created : NaN;
    return Number.isFinite(d) && d >= least ? d : least;
  };
  const deadline = span(def.deadline, 3600e3);
  const expires = Math.max(span(def.expires, 86400e3), deadline);
  const features = { ...((def.payload?.features as Record<string, unknown>) ?? {}), interactive: true };
  const name = def.metadata?.name ?? '';
  return {
    ...def,
    created: iso(now), deadline: iso(now + deadline), expires: iso(now + expires),
    routes: [], dependencies: [], retries: 0,
    payload: { ...def.payload, features },
    metadata: { ...def.metadata, name: name.startsWith('Interactive: ') ? name : `Interactive: ${name}` },
  };
}
