import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { parseDefinition, retriggerText, slugid, withDefaults } from '../src/taskdef';
import { filterRows, type Row } from '../src/pages/tasks';

(globalThis as { location?: unknown }).location = { origin: 'http://hopper.test' };

test('slugids are v4 slugids', () => {
  for (let i = 0; i < 200; i++) assert.match(slugid(), /^[A-Za-z0-9_][A-Za-z0-9_-]{7}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$/);
});

test('YAML and JSON definitions get the defaults hopper task create fills in', () => {
  const now = Date.UTC(2030, 0, 1);
  for (const text of ['payload: {}\nmetadata: {name: x}\n', '{"payload": {}, "metadata": {"name": "x"}}']) {
    const { taskId, def } = withDefaults(parseDefinition(text), now, 'me');
    assert.equal(taskId.length, 22);
    assert.equal(def.created, '2030-01-01T00:00:00.000Z');
    assert.equal(def.deadline, '2030-01-02T00:00:00.000Z');
    assert.equal(def.taskQueueId, 'hopper/default');
    assert.deepEqual(def.metadata, { name: 'x', description: 'Created from the hopper web UI.', owner: 'me', source: 'http://hopper.test/ui/' });
  }
  const named = withDefaults(parseDefinition('taskId: fN1SbArXTPSVFNUvaOlinQ\nprovisionerId: p\nworkerType: w\n'), now, 'me');
  assert.equal(named.taskId, 'fN1SbArXTPSVFNUvaOlinQ');
  assert.equal(named.def.taskId, undefined);
  assert.equal(named.def.taskQueueId, undefined, 'provisionerId/workerType name the queue');
});

test('a definition that is not a mapping is refused with a reason', () => {
  assert.throws(() => parseDefinition('- a\n- b\n'), /must be a mapping/);
  assert.throws(() => parseDefinition('a: [\n'), /neither YAML nor JSON/);
});

test('retrigger moves times to now, keeps their distances, and takes a new taskId', () => {
  const def = { created: '2020-01-01T00:00:00.000Z', deadline: '2020-01-01T02:00:00.000Z', expires: '2020-02-01T00:00:00.000Z',
    payload: { a: 1 }, metadata: { name: 'n', description: 'd', owner: 'o', source: 's' } };
  const copy = parse(retriggerText(def, Date.UTC(2030, 0, 1)));
  assert.equal(copy.created, '2030-01-01T00:00:00.000Z');
  assert.equal(copy.deadline, '2030-01-01T02:00:00.000Z');
  assert.equal(copy.expires, '2030-02-01T00:00:00.000Z');
  assert.equal(copy.taskId.length, 22);
  assert.deepEqual(copy.payload, { a: 1 });
});

test('the task list filters by state, queue and time, newest first', () => {
  const rows: Row[] = [
    { taskId: 'a', name: 'a', state: 'pending', taskQueueId: 'p/x', since: 1000 },
    { taskId: 'b', name: 'b', state: 'running', taskQueueId: 'p/x', since: 5000 },
    { taskId: 'c', name: 'c', state: 'pending', taskQueueId: 'p/y', since: 9000 },
  ];
  const ids = (f: { state: string; queue: string; within: number }) => filterRows(rows, f, 10000).map((r) => r.taskId);
  assert.deepEqual(ids({ state: '', queue: '', within: 0 }), ['c', 'b', 'a']);
  assert.deepEqual(ids({ state: 'pending', queue: '', within: 0 }), ['c', 'a']);
  assert.deepEqual(ids({ state: '', queue: 'p/x', within: 0 }), ['b', 'a']);
  assert.deepEqual(ids({ state: '', queue: '', within: 6000 }), ['c', 'b']);
});
