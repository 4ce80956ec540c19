import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bounds, poolDocument } from '../src/pools';

test('a dynamic pool shows its bounds, a static one none', () => {
  assert.deepEqual(bounds({ config: { minCapacity: 1, maxCapacity: 8 } }), { min: '1', max: '8' });
  assert.deepEqual(bounds({ config: { workerConfig: {} } }), { min: '–', max: '–' });
});

test('a pool read from YAML becomes createWorkerPool\'s body', () => {
  const { id, body } = poolDocument('workerPoolId: proj/linux\nproviderId: static\ndescription: d\nowner: o@example.com\nemailOnError: false\nconfig: {}\n');
  assert.equal(id, 'proj/linux');
  assert.deepEqual(body, { providerId: 'static', description: 'd', owner: 'o@example.com', emailOnError: false, config: {} });
});

test('what workerPool answers can be edited and sent back', () => {
  const { body } = poolDocument(JSON.stringify({ workerPoolId: 'a/b', providerId: 'static', created: 'x', lastModified: 'y', runningCount: 2, config: {} }));
  assert.deepEqual(body, { providerId: 'static', config: {} });
});

test('a definition without its id is refused', () => {
  assert.throws(() => poolDocument('providerId: static\n'), /workerPoolId/);
  assert.throws(() => poolDocument('- a\n'), /mapping/);
});
