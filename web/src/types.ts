// The shapes of the Queue API replies the UI reads (Taskcluster's schemas).

export type State = 'unscheduled' | 'pending' | 'running' | 'completed' | 'failed' | 'exception';
export const STATES: State[] = ['unscheduled', 'pending', 'running', 'completed', 'failed', 'exception'];
export const RESOLVED = new Set<string>(['completed', 'failed', 'exception']);

/** anyUnresolved says whether a group has a task left to cancel. */
export function anyUnresolved(states: string[]): boolean {
  return states.some((s) => !RESOLVED.has(s));
}

export interface Run {
  runId: number;
  state: State;
  reasonCreated: string;
  reasonResolved?: string;
  workerGroup?: string;
  workerId?: string;
  takenUntil?: string;
  scheduled: string;
  started?: string;
  resolved?: string;
}

export interface TaskStatus {
  taskId: string;
  provisionerId: string;
  workerType: string;
  taskQueueId: string;
  schedulerId: string;
  projectId?: string;
  taskGroupId: string;
  deadline: string;
  expires: string;
  retriesLeft: number;
  state: State;
  runs: Run[];
}

export interface TaskDefinition {
  taskQueueId?: string;
  provisionerId?: string;
  workerType?: string;
  schedulerId?: string;
  projectId?: string;
  taskGroupId?: string;
  dependencies?: string[];
  requires?: string;
  routes?: string[];
  priority?: string;
  retries?: number;
  created: string;
  deadline: string;
  expires?: string;
  scopes?: string[];
  payload: Record<string, unknown>;
  metadata: { name: string; description: string; owner: string; source: string };
  tags?: Record<string, string>;
  extra?: Record<string, unknown>;
  [k: string]: unknown;
}

export interface GroupMember {
  status: TaskStatus;
  task: TaskDefinition;
}

export interface Artifact {
  storageType: string;
  name: string;
  expires: string;
  contentType: string;
}

/**
 * WorkerLoad is what hopper adds to the Queue's worker views: whether the
 * worker is online (seen within the long-poll and a minute, or holding a
 * run whose claim lasts), the most tasks it asked for at once and the runs
 * it holds now (docs/history.md, "Workers").
 */
export interface WorkerLoad {
  online?: boolean;
  capacity?: number;
  busy?: number;
}

export interface WorkerSummary extends WorkerLoad {
  workerGroup: string;
  workerId: string;
  quarantineUntil?: string;
  firstClaim?: string;
  latestTask?: { taskId: string; runId: number };
  lastDateActive?: string;
}

export interface Worker extends WorkerLoad {
  provisionerId: string;
  workerType: string;
  workerGroup: string;
  workerId: string;
  quarantineUntil?: string;
  quarantineDetails?: { updatedAt: string; clientId: string; quarantineUntil: string; quarantineInfo: string }[];
  expires: string;
  firstClaim: string;
  recentTasks: { taskId: string; runId: number }[];
  /** The runs it holds now (hopper's addition). */
  runningTasks?: { taskId: string; runId: number; started: string; takenUntil: string }[];
  lastDateActive?: string;
  actions: unknown[];
}

export interface TaskQueue {
  taskQueueId: string;
  expires: string;
  lastDateActive: string;
  description: string;
  stability: string;
}
