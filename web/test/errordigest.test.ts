import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { errorDigest } from '../src/errordigest';
import { ApiError } from '../src/api';

// The cases the CLI's digest passes too (internal/tcclient), so the
// console shows a refusal as the CLI and the worker's log do.
const cases = JSON.parse(readFileSync('../internal/tcclient/testdata/error-digests.json', 'utf8')) as { name: string; message: string; summary: string; details?: string[] }[];

for (const c of cases) {
  test(`error digest: ${c.name}`, () => {
    assert.deepEqual(errorDigest(c.message), { summary: c.summary, details: c.details ?? [] });
  });
}

test('an ApiError shows its digest, missing scopes included', () => {
  const c = cases.find((x) => x.name.startsWith('missing scopes'))!;
  const err = new ApiError(403, 'InsufficientScopes', c.message);
  assert.equal(err.summary, [c.summary, ...(c.details ?? [])].join('\n'));
  assert.match(err.summary, /queue:scheduler-id:-/);
});
