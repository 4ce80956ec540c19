import { test } from 'node:test';
import assert from 'node:assert/strict';
import { holds, livenessLabel, runDuration, slots } from '../src/liveness';
import type { Run } from '../src/types';

const now = Date.parse('2030-01-02T00:10:00.000Z');
const run = (over: Partial<Run>): Run => ({ runId: 0, state: 'running', reasonCreated: 'scheduled', scheduled: '2030-01-02T00:00:00.000Z',
  started: '2030-01-02T00:01:00.000Z', workerGroup: 'g', workerId: 'w', takenUntil: '2030-01-02T00:20:00.000Z', ...over });

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

test('a stopped worker is offline, never busy; an online one is busy or idle', () => {
  assert.equal(livenessLabel({ online: false, capacity: 2, busy: 0 }), 'offline');
  assert.equal(livenessLabel({ online: true, capacity: 2, busy: 1 }), 'busy');
  assert.equal(livenessLabel({ online: true, capacity: 2, busy: 0 }), 'idle');
  assert.equal(livenessLabel({}), '', 'a Taskcluster deployment does not say');
});

test('slots set the busy ones against the capacity, when known', () => {
  assert.equal(slots({ online: true, capacity: 2, busy: 1 }), '1 of 2 busy');
  assert.equal(slots({ online: true, capacity: 4, busy: 0 }), '0 of 4 busy');
  assert.equal(slots({ online: true, capacity: 0, busy: 1 }), '1 busy');
  assert.equal(slots({ online: false }), 'idle');
});
