import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cliCallbackAllowed, cliClientId, fromNow, satisfies, scopeIntersection } from '../src/scopes';

test('a trailing star satisfies its prefix', () => {
  assert.ok(satisfies('*', 'queue:create-task:x'));
  assert.ok(satisfies('queue:*', 'queue:'));
  assert.ok(satisfies('a', 'a'));
  assert.ok(!satisfies('queue:create-task:x', 'queue:create-task:*'));
  assert.ok(!satisfies('a*b', 'a*bc'));
});

test('the intersection keeps what both grant, minimally', () => {
  const cases: [string[], string[], string[]][] = [
    [['*'], ['queue:*', 'auth:current-scopes'], ['auth:current-scopes', 'queue:*']],
    [['queue:create-task:*'], ['queue:*'], ['queue:create-task:*']],
    [['queue:*'], ['queue:create-task:a', 'secrets:get:x'], ['queue:create-task:a']],
    [['a', 'b'], ['c'], []],
    [['a*', 'ab'], ['a*'], ['a*']],
  ];
  for (const [a, b, want] of cases) {
    assert.deepEqual(scopeIntersection(a, b), want, `${a} ∩ ${b}`);
    assert.deepEqual(scopeIntersection(b, a), want, `${b} ∩ ${a}`);
  }
});

test('relative times as the clients write them', () => {
  const now = new Date('2030-01-31T12:00:00.000Z');
  const cases: [string, string | null][] = [
    ['1d', '2030-02-01T12:00:00.000Z'],
    ['2 hours', '2030-01-31T14:00:00.000Z'],
    ['1 day 30 min', '2030-02-01T12:30:00.000Z'],
    ['-1 year', '2029-01-31T12:00:00.000Z'],
    ['1 week', '2030-02-07T12:00:00.000Z'],
    ['90s', '2030-01-31T12:01:30.000Z'],
    ['', null],
    ['soon', null],
    ['3 fortnights', null],
  ];
  for (const [text, want] of cases) assert.equal(fromNow(text, now)?.toISOString() ?? null, want, text);
});

test('credentials go only to a command on this machine', () => {
  for (const ok of ['http://localhost:43123', 'http://localhost:43123/', 'https://localhost/cb', 'http://localhost']) assert.ok(cliCallbackAllowed(ok), ok);
  for (const bad of ['http://localhost.evil.com:1/', 'http://127.0.0.1.nip.io/', 'https://example.com/?localhost', 'javascript:alert(1)//localhost', 'http://localhost@evil.com/']) {
    assert.ok(!cliCallbackAllowed(bad), bad);
  }
});

test('the created client is named after the signed-in one', () => {
  assert.equal(cliClientId('alice/laptop', 'cli-AbC123'), 'alice/laptop/cli-AbC123');
  assert.equal(cliClientId('static/taskcluster/root', 'cli-x'), 'taskcluster/root/cli-x');
});
