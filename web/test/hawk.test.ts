import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { bewit, header, temporaryCredentials, signatureText } from '../src/hawk';

// Vectors generated from the npm hawk and taskcluster-client packages,
// shared with hopper's Go tests.
const testdata = new URL('../../internal/auth/testdata/', import.meta.url);
const hawk = JSON.parse(readFileSync(new URL('hawk.json', testdata), 'utf8'));
const tempcreds = JSON.parse(readFileSync(new URL('tempcreds.json', testdata), 'utf8'));

for (const v of hawk.headers.filter((v: { hash: string }) => v.hash === '')) {
  test(`header: ${v.name}`, async () => {
    const got = await header({ clientId: v.id, accessToken: v.key }, v.method, v.url,
      { now: Number(v.ts) * 1000, nonce: v.nonce, ext: v.ext });
    assert.equal(got, v.header);
  });
}

for (const v of hawk.bewits) {
  test(`bewit: ${v.name}`, async () => {
    const got = await bewit({ clientId: v.id, accessToken: v.key }, v.url, v.ttlSec, { now: v.nowMs, ext: v.ext });
    assert.equal(got, v.bewit);
  });
}

// The "JS form" vector is a quirk of the npm client (a newline after an
// empty scope list) that servers accept; the browser signs the plain form.
for (const v of tempcreds.filter((v: { named: boolean; name: string }) => !v.named && !v.name.includes('JS form'))) {
  test(`temporary credentials: ${v.name}`, async () => {
    const got = await temporaryCredentials({ clientId: v.issuer, accessToken: v.issuerAccessToken }, v.scopes, v.start, v.expiry, v.seed);
    assert.equal(got.accessToken, v.accessToken);
    assert.deepEqual(JSON.parse(got.certificate!), JSON.parse(v.certificate));
  });
}

test('signature text of named credentials names client and issuer', () => {
  assert.equal(signatureText({ seed: 's', start: 1, expiry: 2, scopes: ['a', 'b'], clientId: 'c', issuer: 'i' }),
    'version:1\nclientId:c\nissuer:i\nseed:s\nstart:1\nexpiry:2\nscopes:\na\nb');
});
