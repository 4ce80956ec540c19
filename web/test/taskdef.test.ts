import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { parseDefinition, retriggerText, slugid, withDefaults } from '../src/taskdef';
import { apiQuery, pageQuery, readFilters } from '../src/pages/tasks';
import { fmtTime } from '../src/format';

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

test('the task list asks hopper for its filters, and keeps them in its address', () => {
  const now = Date.UTC(2030, 0, 2);
  const f = readFilters(new URLSearchParams('state=failed&queue=p/x&within=3600000&name=%20build%20'));
  assert.deepEqual(f, { state: 'failed', queue: 'p/x', group: '', name: ' build ', within: 3600000 });
  assert.equal(apiQuery(f, now, 100).toString(),
    'state=failed&taskQueueId=p%2Fx&name=build&createdFrom=2030-01-01T23%3A00%3A00.000Z&limit=100');
  assert.equal(apiQuery(readFilters(new URLSearchParams('')), now, 50, 'tok').toString(), 'limit=50&continuationToken=tok');
  assert.equal(pageQuery(f), 'state=failed&queue=p%2Fx&name=+build+&within=3600000');
  assert.equal(pageQuery(readFilters(new URLSearchParams('within=junk'))), '');
});

test('times name their zone', () => {
  assert.equal(fmtTime('2030-01-02T03:04:05.000Z', 'UTC'), '2030-01-02 03:04:05 UTC');
  assert.equal(fmtTime('2030-07-02T03:04:05.000Z', 'Europe/Berlin'), '2030-07-02 05:04:05 GMT+2');
  assert.match(fmtTime('2030-01-02T03:04:05.000Z'), / \S+$/);
  assert.equal(fmtTime('not a time'), 'not a time');
});

test('an interactive copy turns interactive on and drops what would act on the world', async () => {
  const { interactiveCopy } = await import('../src/taskdef');
  const def = {
    taskQueueId: 'proj/ci', taskGroupId: 'g', created: '2026-01-01T00:00:00.000Z', deadline: '2026-01-01T02:00:00.000Z',
    expires: '2026-01-31T00:00:00.000Z', routes: ['index.x'], dependencies: ['d'], retries: 5, scopes: ['secrets:get:x'],
    payload: { command: [['make']], maxRunTime: 600, features: { liveLog: true } },
    metadata: { name: 'build', description: 'd', owner: 'o@example.com', source: 'https://example.com' },
  };
  const cp = interactiveCopy(def, Date.UTC(2026, 2, 1, 12));
  assert.deepEqual(cp, {
    ...def, created: '2026-03-01T12:00:00.000Z', deadline: '2026-03-01T14:00:00.000Z', expires: '2026-03-31T12:00:00.000Z',
    routes: [], dependencies: [], retries: 0,
    payload: { command: [['make']], maxRunTime: 600, features: { liveLog: true, interactive: true } },
    metadata: { ...def.metadata, name: 'Interactive: build' },
  });
  assert.deepEqual(def.payload.features, { liveLog: true }, 'the original is left as it was');
  const short = interactiveCopy({ ...def, deadline: '2026-01-01T00:05:00.000Z', metadata: { ...def.metadata, name: 'Interactive: build' } }, Date.UTC(2026, 2, 1, 12));
  assert.equal(short.deadline, '2026-03-01T13:00:00.000Z');
  assert.equal(short.metadata.name, 'Interactive: build');
});
