import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildState, buildsPath } from '../src/builds';

test('a repository page asks for its builds, names escaped', () => {
  assert.equal(buildsPath(), '/builds');
  assert.equal(buildsPath('octo'), '/builds?organization=octo');
  assert.equal(buildsPath('octo', 'a b'), '/builds?organization=octo&repository=a%20b');
});

test('build states show as the task states they mean', () => {
  assert.equal(buildState('success'), 'completed');
  assert.equal(buildState('failure'), 'failed');
  assert.equal(buildState('cancelled'), 'exception');
  assert.equal(buildState('pending'), 'pending');
});
