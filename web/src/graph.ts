// Pure computations behind the group views: the dependency graph's layered
// layout and the timeline's critical path. Linear in tasks plus edges, so
// a 10,000-task group lays out in milliseconds.
import type { GroupMember, Run } from './types';

export interface Node {
  taskId: string;
  name: string;
  state: string;
  /** Column (longest dependency chain from a root) and row in it. */
  layer: number;
  row: number;
  deps: string[];
}

export interface Layout {
  nodes: Node[];
  byId: Map<string, Node>;
  layers: number;
  /** The largest row count of any layer. */
  height: number;
  /** Edges between members [from dependency, to dependent]. */
  edges: [Node, Node][];
}

/**
 * layout places each task in the column after its deepest dependency
 * inside the group (dependencies outside the group do not count), rows in
 * the group's order. A cycle cannot exist (the queue refuses them), but a
 * malformed reply would not loop: each task is visited once.
 */
export function layout(members: GroupMember[]): Layout {
  const byId = new Map<string, Node>();
  for (const m of members) {
    byId.set(m.status.taskId, {
      taskId: m.status.taskId, name: m.task.metadata?.name ?? '', state: m.status.state,
      layer: -1, row: 0, deps: (m.task.dependencies ?? []).filter((d) => d !== m.status.taskId),
    });
  }
  // Kahn's order over the edges inside the group: a task's column is set
  // once all its dependencies have theirs. No recursion, so a chain of
  // 10,000 tasks is as cheap as a wide group.
  const nodes = [...byId.values()];
  const waiting = new Map<string, number>();
  const dependents = new Map<string, Node[]>();
  for (const n of nodes) {
    let count = 0;
    for (const id of n.deps) {
      if (!byId.has(id)) continue;
      count++;
      const list = dependents.get(id);
      if (list) list.push(n);
      else dependents.set(id, [n]);
    }
    waiting.set(n.taskId, count);
  }
  const ready = nodes.filter((n) => waiting.get(n.taskId) === 0);
  for (const n of ready) n.layer = 0;
  for (let i = 0; i < ready.length; i++) {
    const n = ready[i];
    for (const d of dependents.get(n.taskId) ?? []) {
      d.layer = Math.max(d.layer, n.layer + 1);
      const left = waiting.get(d.taskId)! - 1;
      waiting.set(d.taskId, left);
      if (left === 0) ready.push(d);
    }
  }
  // Only a cycle (which the queue refuses) leaves a task unplaced.
  for (const n of nodes) if (n.layer < 0) n.layer = 0;
  const counts: number[] = [];
  for (const n of nodes) {
    counts[n.layer] = (counts[n.layer] ?? 0) + 1;
    n.row = counts[n.layer] - 1;
  }
  const edges: [Node, Node][] = [];
  for (const n of nodes) {
    for (const id of n.deps) {
      const dep = byId.get(id);
      if (dep) edges.push([dep, n]);
    }
  }
  return { nodes, byId, layers: counts.length, height: Math.max(0, ...counts), edges };
}

export interface Bar {
  taskId: string;
  name: string;
  runId: number;
  state: string;
  /** ms since the epoch; start is when the run started (or was scheduled, if it never started). */
  scheduled: number;
  start: number;
  end: number;
  /** The run has not resolved yet: end is now. */
  open: boolean;
  /** The run never started: it only waited (from scheduled to end). */
  waiting: boolean;
}

const ms = (iso?: string) => (iso ? Date.parse(iso) : NaN);

/** bars returns every run of the group as a timeline bar, earliest first. */
export function bars(members: GroupMember[], now: number): Bar[] {
  const out: Bar[] = [];
  for (const m of members) {
    for (const r of m.status.runs as Run[]) {
      const scheduled = ms(r.scheduled);
      if (Number.isNaN(scheduled)) continue;
      const started = ms(r.started);
      const resolved = ms(r.resolved);
      out.push({
        taskId: m.status.taskId, name: m.task.metadata?.name ?? '', runId: r.runId, state: r.state,
        scheduled, start: Number.isNaN(started) ? (Number.isNaN(resolved) ? now : resolved) : started,
        end: Number.isNaN(resolved) ? now : resolved, open: Number.isNaN(resolved), waiting: Number.isNaN(started),
      });
    }
  }
  out.sort((a, b) => a.start - b.start || a.taskId.localeCompare(b.taskId) || a.runId - b.runId);
  return out;
}

/**
 * criticalPath is the chain of tasks that decided when the group finished:
 * from the task that resolved last, step to the dependency that resolved
 * last (the one it waited for), until a task with no dependency in the
 * group. Returned first task first.
 */
export function criticalPath(members: GroupMember[], now: number): string[] {
  const byId = new Map(members.map((m) => [m.status.taskId, m]));
  const endOf = (m: GroupMember): number => {
    const runs = m.status.runs;
    if (!runs.length) return -Infinity;
    const last = runs[runs.length - 1];
    const r = ms(last.resolved);
    return Number.isNaN(r) ? (last.started || last.state === 'pending' ? now : -Infinity) : r;
  };
  let last: GroupMember | undefined;
  for (const m of members) if (!last || endOf(m) > endOf(last)) last = m;
  const path: string[] = [];
  const seen = new Set<string>();
  while (last && endOf(last) > -Infinity && !seen.has(last.status.taskId)) {
    seen.add(last.status.taskId);
    path.push(last.status.taskId);
    let next: GroupMember | undefined;
    for (const id of last.task.dependencies ?? []) {
      const dep = byId.get(id);
      if (dep && (!next || endOf(dep) > endOf(next))) next = dep;
    }
    last = next;
  }
  return path.reverse();
}

/** The steps an axis may take, in ms: round numbers of ms, seconds, minutes, hours and days. */
const STEPS = [100, 200, 500, 1e3, 2e3, 5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1800e3,
  3600e3, 7200e3, 10800e3, 21600e3, 43200e3, 86400e3, 172800e3, 604800e3];

/**
 * axisTicks returns the offsets (ms from the start) of an axis over span:
 * multiples of the smallest round step that gives at most max ticks, so
 * each tick's label ("+2 min") is exactly where the tick is.
 */
export function axisTicks(span: number, max = 6): number[] {
  const step = STEPS.find((s) => Math.floor(span / s) + 1 <= max) ?? Math.ceil(span / (max - 1) / 86400e3) * 86400e3;
  const out: number[] = [];
  for (let t = 0; t <= span; t += step) out.push(t);
  return out;
}

/** The orders a group's task list can take. */
export type MemberOrder = 'pipeline' | 'state' | 'duration';

const STATE_ORDER = ['failed', 'exception', 'running', 'pending', 'unscheduled', 'completed'];

/**
 * sortMembers orders a group's tasks: by pipeline order (the column of the
 * dependency graph, then name), by state (failures first, then what is
 * running, waiting, and done), or by the duration of each task's last run
 * (longest first; tasks that never ran last).
 */
export function sortMembers(members: GroupMember[], by: MemberOrder, now: number): GroupMember[] {
  const name = (m: GroupMember) => m.task.metadata?.name ?? '';
  const out = [...members];
  if (by === 'pipeline') {
    const { byId } = layout(members);
    const layer = (m: GroupMember) => byId.get(m.status.taskId)?.layer ?? 0;
    out.sort((a, b) => layer(a) - layer(b) || name(a).localeCompare(name(b)));
  } else if (by === 'state') {
    const rank = (m: GroupMember) => STATE_ORDER.indexOf(m.status.state);
    out.sort((a, b) => rank(a) - rank(b) || name(a).localeCompare(name(b)));
  } else {
    const took = (m: GroupMember) => {
      const r = m.status.runs[m.status.runs.length - 1];
      if (!r?.started) return -1;
      return (r.resolved ? Date.parse(r.resolved) : now) - Date.parse(r.started);
    };
    out.sort((a, b) => took(b) - took(a) || name(a).localeCompare(name(b)));
  }
  return out;
}

/** The graph's geometry in px: node size, column and row pitch, padding. */
export const GEOMETRY = { nodeW: 190, nodeH: 26, colW: 250, rowH: 34, pad: 12 };

/** nodeBox is where a node is drawn. */
export function nodeBox(n: Node, g = GEOMETRY): { x: number; y: number } {
  return { x: g.pad + n.layer * g.colW, y: g.pad + n.row * g.rowH };
}

/**
 * edgePath draws the edge from a dependency to its dependent. Between
 * neighbouring columns it is one curve in the gap between them. An edge
 * that skips columns leaves its source, runs along the gap between two
 * rows through the columns it skips, and turns into its target in the gap
 * before it, so it never passes behind a node it does not connect (a line
 * behind a node read as a chain through that node).
 */
export function edgePath(a: Node, b: Node, g = GEOMETRY): string {
  const pa = nodeBox(a, g), pb = nodeBox(b, g);
  const x1 = pa.x + g.nodeW, y1 = pa.y + g.nodeH / 2, x2 = pb.x, y2 = pb.y + g.nodeH / 2;
  if (b.layer - a.layer <= 1) {
    const mid = (x1 + x2) / 2;
    return `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`;
  }
  const half = (g.rowH - g.nodeH) / 2;
  // The gap below the source's row when the target is lower, else above it.
  const lane = b.row >= a.row ? pa.y + g.nodeH + half : pa.y - half;
  const turn = (g.colW - g.nodeW) / 2;
  return `M${x1},${y1} C${x1 + turn},${y1} ${x1},${lane} ${x1 + turn},${lane} L${x2 - turn},${lane} C${x2},${lane} ${x2 - turn},${y2} ${x2},${y2}`;
}

/**
 * The graph's zoom: the scales its − and + buttons step through, and the
 * smallest fit (a deeper graph scrolls at that scale rather than shrink to
 * nodes under a pixel wide).
 */
export const ZOOM = { min: 0.02, steps: [0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2] };

/** fitScale is the scale at which a drawing contentWidth wide fits viewWidth: never above 1 (a shallow graph keeps its size), never below ZOOM.min. */
export function fitScale(contentWidth: number, viewWidth: number): number {
  if (contentWidth <= 0 || viewWidth <= 0) return 1;
  return Math.max(ZOOM.min, Math.min(1, viewWidth / contentWidth));
}

/** zoomStep is the next scale of ZOOM.steps above (dir 1) or below (dir -1) scale, or scale itself at the end of the steps. */
export function zoomStep(scale: number, dir: 1 | -1): number {
  const eps = 1e-9;
  if (dir > 0) return ZOOM.steps.find((s) => s > scale + eps) ?? scale;
  return [...ZOOM.steps].reverse().find((s) => s < scale - eps) ?? scale;
}

/** LABEL_MIN_SCALE is the smallest scale at which node names are drawn: below it they are unreadable, and each node's name is in its tooltip. */
export const LABEL_MIN_SCALE = 0.45;
