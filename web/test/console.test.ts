import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../src/api';
import { needsSignIn } from '../src/access';
import { deliveriesFor, deliveryHref, deliveryState, type Delivery } from '../src/builds';
import { workerBadge } from '../src/pools';
import { anyUnresolved } from '../src/types';

test('signed out, a refused read asks to sign in; signed in, it is shown as it came', () => {
  const scopes = new ApiError(403, 'InsufficientScopes', 'This request requires Taskcluster credentials that satisfy …');
  assert.equal(needsSignIn(scopes, false), true);
  assert.equal(needsSignIn(new ApiError(401, 'AuthenticationFailed', 'x'), false), true);
  assert.equal(needsSignIn(scopes, true), false);
  assert.equal(needsSignIn(new ApiError(404, 'ResourceNotFound', 'x'), false), false);
  assert.equal(needsSignIn(new Error('network'), false), false);
  assert.equal(needsSignIn(undefined, false), false);
});

test('a group offers Cancel group only while a task is unresolved', () => {
  assert.equal(anyUnresolved(['completed', 'failed', 'exception']), false);
  assert.equal(anyUnresolved(['completed', 'unscheduled']), true);
  assert.equal(anyUnresolved(['running']), true);
  assert.equal(anyUnresolved([]), false);
});

test('a worker shows its own state, in a colour of its own', () => {
  assert.equal(workerBadge('running'), 'running');
  assert.equal(workerBadge('requested'), 'pending');
  assert.equal(workerBadge('stopped'), 'exception');
});

test('failed deliveries: by repository, each with its page', () => {
  const d = (repository: string, state = 'failed'): Delivery => ({ host: 'git.example.com:3000', deliveryId: 'a/b', event: 'push', repository, received: '', state, attempts: 1, outcome: '', error: 'x' });
  const list = [d('octo/one'), d('octo/two'), d('other/one')];
  assert.equal(deliveriesFor(list).length, 3);
  assert.deepEqual(deliveriesFor(list, 'octo').map((x) => x.repository), ['octo/one', 'octo/two']);
  assert.deepEqual(deliveriesFor(list, 'octo', 'two').map((x) => x.repository), ['octo/two']);
  assert.equal(deliveryHref(list[0]), '#/delivery/git.example.com%3A3000/a%2Fb');
  assert.equal(deliveryState(d('o/r', 'pending')), 'pending');
  assert.equal(deliveryState(d('o/r', 'done')), 'exception');
});

test('the audit log asks the auth service for the view shown', async () => {
  const { auditApiPath, auditHref } = await import('../src/audit');
  assert.equal(auditApiPath('client', 'ci/bot'), '/audit/client/ci%2Fbot'.replace('%2F', '/'));
  assert.equal(auditApiPath('role', 'repo:github.com/o/r:branch:*'), '/audit/role/repo%3Agithub.com/o/r%3Abranch%3A*');
  assert.equal(auditApiPath('by', 'static/taskcluster/root'), '/clients/static%2Ftaskcluster%2Froot/audit');
  assert.equal(auditHref('role', 'a/b'), '#/audit/role/a%2Fb');
});
