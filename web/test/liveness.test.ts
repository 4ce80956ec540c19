import { test } from 'node:test';
import assert from 'node:assert/strict';
import { asking, holds, runDuration, POLL_WINDOW } from '../src/liveness';
import type { Run } from '../src/types';

const now = Date.parse('2030-01-02T00:10:00.000Z');
const run = (over: Partial<Run>): Run => ({ runId: 0, state: 'running', reasonCreated: 'scheduled', scheduled: '2030-01-02T00:00:00.000Z',
  started: '2030-01-02T00:01:00.000Z', workerGroup: 'g', workerId: 'w', takenUntil: '2030-01-02T00:20:00.000Z', ...over });

test('a worker asks for work while its last claimWork is recent', () => {
  assert.ok(asking(new Date(now - 30e3).toISOString(), now));
  assert.ok(asking(new Date(now - POLL_WINDOW).toISOString(), now));
  assert.ok(!asking(new Date(now - POLL_WINDOW - 1).toISOString(), now));
  assert.ok(!asking(undefined, now));
});

test('a worker holds a run only while it is its running run with a claim that lasts', () => {
  assert.ok(holds(run({}), 'g', 'w', now));
  assert.ok(!holds(run({ takenUntil: '2030-01-02T00:09:59.000Z' }), 'g', 'w', now), 'the claim ran out: the worker stopped');
  assert.ok(!holds(run({ state: 'completed' }), 'g', 'w', now));
  assert.ok(!holds(run({ workerId: 'other' }), 'g', 'w', now));
  assert.ok(!holds(undefined, 'g', 'w', now));
});

test('a run lasts from its start to its resolution, or to now', () => {
  assert.equal(runDuration(run({ state: 'completed', resolved: '2030-01-02T00:03:30.000Z' }), now), 150e3);
  assert.equal(runDuration(run({}), now), 540e3);
  assert.ok(Number.isNaN(runDuration(run({ started: undefined }), now)));
});
