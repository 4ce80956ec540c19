import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nextRenewal, renewIn, signInHref } from '../src/login';

test('credentials are renewed five minutes before they expire, at once when later', () => {
  const now = 1_000_000_000;
  assert.equal(renewIn(now + 60 * 60 * 1000, now), 55 * 60 * 1000);
  assert.equal(renewIn(now + 60 * 1000, now), 0);
  assert.equal(renewIn(now - 1, now), 0);
});

test("a provider's button comes back to the page it was pressed on", () => {
  const p = { name: 'gitea', kind: 'gitea', displayName: 'Gitea', signInUrl: '/login/gitea' };
  assert.equal(signInHref(p, '/ui/#/third-party?client_id=th&scope=a b'), '/login/gitea?returnTo=%2Fui%2F%23%2Fthird-party%3Fclient_id%3Dth%26scope%3Da%20b');
});

test('credentials that end with the session are asked for again only once expired', () => {
  const now = 1_000_000_000;
  const end = now + 2 * 60 * 1000;
  assert.equal(nextRenewal(end, 0, now), 0, 'first: at once, they are within five minutes of their end');
  assert.equal(nextRenewal(end, end, now), 2 * 60 * 1000 + 1000, 'renewing gave no later end: wait for it');
  assert.equal(nextRenewal(now + 60 * 60 * 1000, end, now), 55 * 60 * 1000, 'a later end: five minutes before it');
});
