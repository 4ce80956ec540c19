// Generates the JSON test vectors of internal/hawk and internal/auth by
// running the upstream npm packages pinned in package.json (hawk,
// taskcluster-client, taskcluster-lib-scopes). Run with `npm ci && node
// gen.mjs`; the files are written to ../ (internal/auth/testdata) and are
// committed, so Go tests never need Node.
//
// Everything random (nonces, seeds) is recorded in the output, and clocks
// are pinned, so the Go side can recompute every value.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import taskcluster from 'taskcluster-client';

const require = createRequire(import.meta.url);
const hawk = require('hawk');
const scopes = require('taskcluster-lib-scopes');

const here = path.dirname(fileURLToPath(import.meta.url));
const outDir = path.join(here, '..');

const write = (name, value) => {
  fs.writeFileSync(path.join(outDir, name), JSON.stringify(value, null, 2) + '\n');
  console.log('wrote', name);
};

// Message of a failed Hawk authentication as Taskcluster's signature
// validator renders it.
const tcMessage = err => {
  if (err.isBoom && !err.isServer) {
    let message = err.output.payload.error;
    if (err.output.payload.message) {
      message += ': ' + err.output.payload.message;
    }
    return message;
  }
  return err.message;
};

const NOW_MS = 1700000000000;
const setNow = ms => hawk.utils.setTimeFunction(() => ms);

// ---------------------------------------------------------------------------
// Hawk headers (client side)

const hawkHeaders = [];
const headerCase = (name, { id, key, method, url, ts, nonce, hash, ext, payload, contentType }) => {
  const { header, artifacts } = hawk.client.header(url, method, {
    credentials: { id, key, algorithm: 'sha256' },
    timestamp: ts, nonce, hash, ext, payload, contentType,
  });
  hawkHeaders.push({
    name, id, key, method, url, ts: String(ts), nonce,
    hash: artifacts.hash || '', ext: ext || '',
    resource: artifacts.resource, host: artifacts.host.toLowerCase(), port: Number(artifacts.port),
    normalized: hawk.crypto.generateNormalizedString('header', artifacts),
    header,
  });
};

const H_ID = 'tester';
const H_KEY = 'no-secret';
const queueURL = 'https://tc.example.com/api/queue/v1';
const authzExt = s => Buffer.from(JSON.stringify({ authorizedScopes: s })).toString('base64');

headerCase('get', { id: H_ID, key: H_KEY, method: 'GET', url: `${queueURL}/task/fN1SbArXTPSVFNUvaOlinQ/status`, ts: 1700000000, nonce: 'Xa1b2C' });
headerCase('post encoded path query port ext', {
  id: H_ID, key: H_KEY, method: 'POST', ts: 1700000000, nonce: 'Xa1b2C',
  url: 'http://localhost:8080/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/runs/0/artifacts/public%2Flogs%2Flive.log?x=1',
  ext: authzExt(['queue:get-artifact:public/*']),
});
headerCase('put payload hash', {
  id: H_ID, key: H_KEY, method: 'PUT', ts: 1700000000, nonce: 'Xa1b2C',
  url: `${queueURL}/task/fN1SbArXTPSVFNUvaOlinQ`, payload: '{"a":1}', contentType: 'application/json',
});
headerCase('hash and ext', {
  id: 'static/taskcluster/root', key: 'rootAccessTokenRootAccessToken0123456789abcd', method: 'POST',
  ts: 1700000123, nonce: 'q_-9Zz', url: `${queueURL}/claim-work/proj%2Fpool`,
  payload: '{"tasks":1,"workerGroup":"g","workerId":"w"}', contentType: 'application/json; charset=utf-8',
  ext: authzExt(['queue:claim-work:proj/pool', 'queue:worker-id:g/w']),
});
headerCase('empty payload hash', {
  id: H_ID, key: H_KEY, method: 'DELETE', ts: 1700000000, nonce: 'AAAAAA',
  url: 'https://tc.example.com:9443/api/auth/v1/clients/a%2Fb', payload: '', contentType: '',
});
headerCase('trailing question mark', { id: H_ID, key: H_KEY, method: 'GET', url: `${queueURL}/ping?`, ts: 1700000000, nonce: 'Xa1b2C' });
headerCase('uppercase host', { id: H_ID, key: H_KEY, method: 'get', url: 'http://TC.Example.COM/api/queue/v1/ping', ts: 1700000000, nonce: 'Xa1b2C' });
headerCase('star and space in path', {
  id: H_ID, key: H_KEY, method: 'GET', ts: 1699999999, nonce: 'abcdef',
  url: `${queueURL}/task-group/abc/list?continuationToken=a%20b&limit=10`,
});

// ---------------------------------------------------------------------------
// Hawk server side: what hawk.server.authenticate (as configured by
// Taskcluster: 15 minutes of skew, no nonce tracking) says about a request.

const hawkServer = [];
const serverCase = async (name, req, key, nowMs) => {
  setNow(nowMs);
  let error = '';
  try {
    await hawk.server.authenticate(
      { method: req.method.toUpperCase(), url: req.resource, host: req.host, port: req.port, authorization: req.authorization },
      async () => ({ key, algorithm: 'sha256' }),
      { timestampSkewSec: 15 * 60 });
  } catch (err) {
    error = tcMessage(err);
  }
  hawkServer.push({ name, ...req, key, nowMs, error });
};

const base = hawkHeaders[1];
const baseReq = { method: base.method, resource: base.resource, host: base.host, port: base.port, authorization: base.header };
await serverCase('valid', baseReq, H_KEY, NOW_MS);
await serverCase('valid at skew edge future', baseReq, H_KEY, NOW_MS - 900000);
await serverCase('valid at skew edge past', baseReq, H_KEY, NOW_MS + 900000);
await serverCase('stale past', baseReq, H_KEY, NOW_MS + 900001);
await serverCase('stale future', baseReq, H_KEY, NOW_MS - 900001);
await serverCase('stale but bad mac', baseReq, 'wrong', NOW_MS + 3600000);
await serverCase('wrong key', baseReq, 'wrong', NOW_MS);
await serverCase('altered method', { ...baseReq, method: 'PUT' }, H_KEY, NOW_MS);
await serverCase('lowercase method', { ...baseReq, method: 'post' }, H_KEY, NOW_MS);
await serverCase('decoded path', { ...baseReq, resource: base.resource.replace(/%2F/g, '/') }, H_KEY, NOW_MS);
await serverCase('altered query', { ...baseReq, resource: base.resource + '&y=2' }, H_KEY, NOW_MS);
await serverCase('altered host', { ...baseReq, host: 'example.com' }, H_KEY, NOW_MS);
await serverCase('uppercase host', { ...baseReq, host: 'LOCALHOST' }, H_KEY, NOW_MS);
await serverCase('altered port', { ...baseReq, port: 443 }, H_KEY, NOW_MS);
const hashed = hawkHeaders[2];
const hashedReq = { method: hashed.method, resource: hashed.resource, host: hashed.host, port: hashed.port, authorization: hashed.header };
await serverCase('hash valid', hashedReq, H_KEY, NOW_MS);
await serverCase('hash removed', { ...hashedReq, authorization: hashed.header.replace(/, hash="[^"]*"/, '') }, H_KEY, NOW_MS);
await serverCase('hash altered', { ...hashedReq, authorization: hashed.header.replace(/hash="./, 'hash="X') }, H_KEY, NOW_MS);
await serverCase('ext altered', { ...baseReq, authorization: base.header.replace(/ext="./, 'ext="f') }, H_KEY, NOW_MS);

const malformed = [
  ['empty', ''],
  ['basic scheme', 'Basic dGVzdGVyOm5vLXNlY3JldA=='],
  ['bearer scheme', 'Bearer abc'],
  ['scheme only', 'Hawk'],
  ['scheme and spaces', 'Hawk   '],
  ['lowercase scheme', base.header.replace(/^Hawk/, 'hawk')],
  ['mixed case scheme', base.header.replace(/^Hawk/, 'hAwK')],
  ['no space after scheme', 'Hawkid="a"'],
  ['tab after scheme', base.header.replace(/^Hawk /, 'Hawk\t')],
  ['missing mac', 'Hawk id="tester", ts="1700000000", nonce="Xa1b2C"'],
  ['missing id', 'Hawk ts="1700000000", nonce="Xa1b2C", mac="abc"'],
  ['missing ts', 'Hawk id="tester", nonce="Xa1b2C", mac="abc"'],
  ['missing nonce', 'Hawk id="tester", ts="1700000000", mac="abc"'],
  ['unknown attribute', 'Hawk id="tester", ts="1700000000", nonce="Xa1b2C", foo="bar", mac="abc"'],
  ['duplicate attribute', 'Hawk id="tester", id="other", ts="1700000000", nonce="Xa1b2C", mac="abc"'],
  ['empty value', 'Hawk id="", ts="1700000000", nonce="Xa1b2C", mac="abc"'],
  ['bad value char', 'Hawk id="t\u00e9ster", ts="1700000000", nonce="Xa1b2C", mac="abc"'],
  ['unquoted value', 'Hawk id=tester, ts="1700000000", nonce="Xa1b2C", mac="abc"'],
  ['escaped quote', 'Hawk id="te\\"ster", ts="1700000000", nonce="Xa1b2C", mac="abc"'],
  ['garbage between', 'Hawk id="tester" x ts="1700000000", nonce="Xa1b2C", mac="abc"'],
  ['trailing comma', base.header + ','],
  ['trailing comma space', base.header + ', '],
  ['trailing garbage', base.header + ' x'],
  ['no comma separators', 'Hawk id="tester" ts="1700000000" nonce="Xa1b2C" mac="abc"'],
  ['unknown then duplicate', 'Hawk id="tester", foo="1", id="x", ts="1700000000", nonce="Xa1b2C", mac="abc"'],
  ['duplicate then unknown', 'Hawk id="tester", id="x", foo="1", ts="1700000000", nonce="Xa1b2C", mac="abc"'],
  ['app and dlg', 'Hawk id="tester", ts="1700000000", nonce="Xa1b2C", app="a", dlg="d", mac="abc"'],
  ['newline in header', 'Hawk id="tester",\nts="1700000000", nonce="Xa1b2C", mac="abc"'],
  ['non numeric ts', 'Hawk id="tester", ts="soon", nonce="Xa1b2C", mac="abc"'],
  ['too long', 'Hawk id="tester", ts="1700000000", nonce="Xa1b2C", ext="' + 'a'.repeat(4100) + '", mac="abc"'],
  ['exactly 4096', (() => {
    const pre = 'Hawk id="tester", ts="1700000000", nonce="Xa1b2C", ext="';
    const post = '", mac="abc"';
    return pre + 'a'.repeat(4096 - pre.length - post.length) + post;
  })()],
];
for (const [name, authorization] of malformed) {
  await serverCase('malformed: ' + name, { ...baseReq, authorization }, H_KEY, NOW_MS);
}

// A header with a non-numeric ts but a correct MAC (never stale in Hawk).
{
  const { header } = hawk.client.header('https://tc.example.com/x', 'GET', {
    credentials: { id: H_ID, key: H_KEY, algorithm: 'sha256' }, timestamp: 'soon', nonce: 'Xa1b2C',
  });
  await serverCase('non numeric ts with valid mac', { method: 'GET', resource: '/x', host: 'tc.example.com', port: 443, authorization: header }, H_KEY, NOW_MS);
  const { header: h2 } = hawk.client.header('https://tc.example.com/x', 'GET', {
    credentials: { id: H_ID, key: H_KEY, algorithm: 'sha256' }, timestamp: '0x6553F100', nonce: 'Xa1b2C',
  });
  await serverCase('hex ts with valid mac', { method: 'GET', resource: '/x', host: 'tc.example.com', port: 443, authorization: h2 }, H_KEY, NOW_MS);
}

// ---------------------------------------------------------------------------
// Bewits

const bewits = [];
const bewitCase = (name, { id, key, url, nowMs, ttlSec, ext }) => {
  setNow(nowMs);
  const bewit = hawk.client.getBewit(url, { credentials: { id, key, algorithm: 'sha256' }, ttlSec, ext });
  bewits.push({ name, id, key, url, nowMs, ttlSec, ext: ext || '', bewit, decoded: Buffer.from(bewit, 'base64').toString('binary') });
};
bewitCase('no ext', { id: H_ID, key: H_KEY, nowMs: NOW_MS, ttlSec: 900, url: `${queueURL}/task/fN1SbArXTPSVFNUvaOlinQ/runs/0/artifacts/private%2Fbuild%2Ftarget.tar.gz` });
bewitCase('ext', { id: H_ID, key: H_KEY, nowMs: NOW_MS, ttlSec: 600, url: `${queueURL}/task/fN1SbArXTPSVFNUvaOlinQ/artifacts/private%2Fx.txt`, ext: authzExt(['queue:get-artifact:private/*']) });
bewitCase('query and port', { id: 'static/taskcluster/root', key: 'rootAccessTokenRootAccessToken0123456789abcd', nowMs: NOW_MS + 123456, ttlSec: 60, url: 'http://localhost:8080/api/queue/v1/task/x/artifacts/a%20b?foo=bar' });

const bewitServer = [];
const bewitServerCase = async (name, req, key, nowMs) => {
  setNow(nowMs);
  let error = '';
  let attrs = null;
  try {
    const res = await hawk.uri.authenticate(
      { method: req.method.toUpperCase(), url: req.resource, host: req.host, port: req.port },
      async () => ({ key, algorithm: 'sha256' }), {});
    attrs = res.attributes;
  } catch (err) {
    error = tcMessage(err);
  }
  bewitServer.push({ name, ...req, key, nowMs, error, id: attrs ? attrs.id : '', ext: attrs ? attrs.ext : '' });
};
{
  const b = bewits[1];
  const resource = new URL(b.url).pathname;
  const req = { method: 'GET', resource: resource + '?bewit=' + b.bewit, host: 'tc.example.com', port: 443 };
  await bewitServerCase('valid', req, H_KEY, NOW_MS);
  await bewitServerCase('valid head', { ...req, method: 'HEAD' }, H_KEY, NOW_MS);
  await bewitServerCase('valid just before expiry', req, H_KEY, NOW_MS + 599999);
  await bewitServerCase('expired', req, H_KEY, NOW_MS + 600000);
  await bewitServerCase('expired and bad mac', req, 'wrong', NOW_MS + 600000);
  await bewitServerCase('wrong key', req, 'wrong', NOW_MS);
  await bewitServerCase('post', { ...req, method: 'POST' }, H_KEY, NOW_MS);
  await bewitServerCase('other path', { ...req, resource: resource + 'x?bewit=' + b.bewit }, H_KEY, NOW_MS);
  await bewitServerCase('other host', { ...req, host: 'evil.example.com' }, H_KEY, NOW_MS);
  await bewitServerCase('other port', { ...req, port: 8443 }, H_KEY, NOW_MS);
  await bewitServerCase('empty bewit', { ...req, resource: resource + '?bewit=' }, H_KEY, NOW_MS);
  await bewitServerCase('empty bewit then param', { ...req, resource: resource + '?bewit=&a=1' }, H_KEY, NOW_MS);
  await bewitServerCase('bad encoding', { ...req, resource: resource + '?bewit=abc.def' }, H_KEY, NOW_MS);
  await bewitServerCase('bad structure', { ...req, resource: resource + '?bewit=' + Buffer.from('a\\b\\c').toString('base64url') }, H_KEY, NOW_MS);
  await bewitServerCase('too many parts', { ...req, resource: resource + '?bewit=' + Buffer.from('a\\b\\c\\d\\e').toString('base64url') }, H_KEY, NOW_MS);
  await bewitServerCase('missing attributes', { ...req, resource: resource + '?bewit=' + Buffer.from('a\\\\c\\d').toString('base64url') }, H_KEY, NOW_MS);
  await bewitServerCase('too long', { ...req, resource: resource + '?bewit=' + b.bewit + '&x=' + 'y'.repeat(4096) }, H_KEY, NOW_MS);
  await bewitServerCase('trailing ampersand', { ...req, resource: resource + '?bewit=' + b.bewit + '&' }, H_KEY, NOW_MS);
  await bewitServerCase('dangling char', { ...req, resource: resource + '?bewit=' + b.bewit + 'A' }, H_KEY, NOW_MS);
}
{
  // Bewits placed among other query parameters: the MAC resource drops
  // the bewit parameter only.
  const url = 'https://tc.example.com/api/queue/v1/task/abc/artifacts/public%2Fa?a=1&b=2';
  setNow(NOW_MS);
  const bw = hawk.client.getBewit(url, { credentials: { id: H_ID, key: H_KEY, algorithm: 'sha256' }, ttlSec: 900 });
  const req = { method: 'GET', host: 'tc.example.com', port: 443 };
  await bewitServerCase('bewit in the middle', { ...req, resource: '/api/queue/v1/task/abc/artifacts/public%2Fa?a=1&bewit=' + bw + '&b=2' }, H_KEY, NOW_MS);
  await bewitServerCase('bewit last', { ...req, resource: '/api/queue/v1/task/abc/artifacts/public%2Fa?a=1&b=2&bewit=' + bw }, H_KEY, NOW_MS);
  await bewitServerCase('bewit first', { ...req, resource: '/api/queue/v1/task/abc/artifacts/public%2Fa?bewit=' + bw + '&a=1&b=2' }, H_KEY, NOW_MS);
}

// ---------------------------------------------------------------------------
// Payload hashes

const payloadHashes = [
  ['', ''],
  ['application/json', '{"a":1}'],
  ['application/json; charset=utf-8', '{"a":1}'],
  [' Application/JSON ', '{"a":1}'],
  ['text/plain', 'h\u00e9llo w\u00f6rld\n'],
  ['application/json', JSON.stringify({ taskQueueId: 'proj/pool', payload: { command: ['echo', 'hi'] } })],
].map(([contentType, body]) => ({ contentType, body, hash: hawk.crypto.calculatePayloadHash(body, 'sha256', contentType) }));

// ---------------------------------------------------------------------------
// Requests as taskcluster-client really sends them, captured by a local
// server: the header, the raw request-target and the body.

const captured = [];
const server = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', c => { body += c; });
  req.on('end', () => {
    captured.push({
      method: req.method, resource: req.url, hostHeader: req.headers.host,
      authorization: req.headers.authorization || '', contentType: req.headers['content-type'] || '', body,
    });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
});
await new Promise(r => server.listen(0, '127.0.0.1', r));
const rootUrl = `http://127.0.0.1:${server.address().port}`;

const ROOT = { clientId: 'static/taskcluster/root', accessToken: 'rootAccessTokenRootAccessToken0123456789abcd' };
const temp = taskcluster.createTemporaryCredentials({
  clientId: 'task-client/abc',
  start: new Date(NOW_MS), expiry: new Date(NOW_MS + 3600000),
  scopes: ['queue:create-artifact:abc/0', 'queue:get-artifact:private/*'],
  credentials: ROOT,
});
const clientRequests = [];
const capture = async (name, credentials, authorizedScopes, call) => {
  setNow(NOW_MS);
  captured.length = 0;
  const queue = new taskcluster.Queue({ rootUrl, credentials, authorizedScopes, retries: 0 });
  await call(queue);
  const c = captured[0];
  const [host, port] = c.hostHeader.split(':');
  clientRequests.push({
    name, clientId: credentials.clientId, accessToken: credentials.accessToken,
    certificate: credentials.certificate || '', authorizedScopes: authorizedScopes || null,
    ext: queue._extData || '', nowMs: NOW_MS,
    method: c.method, resource: c.resource, host, port: Number(port),
    authorization: c.authorization, contentType: c.contentType, body: c.body,
  });
};
await capture('get task', ROOT, null, q => q.task('fN1SbArXTPSVFNUvaOlinQ'));
await capture('create task', ROOT, null, q => q.createTask('fN1SbArXTPSVFNUvaOlinQ', { taskQueueId: 'proj/pool', payload: {} }));
await capture('query string', ROOT, null, q => q.listTaskGroup('fN1SbArXTPSVFNUvaOlinQ', { continuationToken: 'a b', limit: 10 }));
await capture('encoded artifact name', ROOT, null, q => q.artifactInfo('fN1SbArXTPSVFNUvaOlinQ', '0', 'public/logs/live log.txt'));
await capture('authorized scopes', ROOT, ['queue:get-task:*'], q => q.task('fN1SbArXTPSVFNUvaOlinQ'));
await capture('temporary credentials', temp, null, q => q.task('fN1SbArXTPSVFNUvaOlinQ'));
await capture('temporary credentials and authorized scopes', temp, ['queue:get-artifact:private/x'], q => q.task('fN1SbArXTPSVFNUvaOlinQ'));
server.close();

const signedUrls = [];
for (const [name, credentials, authorizedScopes, expiration] of [
  ['root default expiry', ROOT, null, undefined],
  ['temporary credentials', temp, null, 60],
  ['authorized scopes', ROOT, ['queue:get-artifact:private/x'], 300],
]) {
  setNow(NOW_MS);
  const queue = new taskcluster.Queue({ rootUrl: 'https://tc.example.com', credentials, authorizedScopes });
  const args = [queue.getArtifact, 'fN1SbArXTPSVFNUvaOlinQ', '0', 'private/build/target.tar.gz'];
  if (expiration) {
    args.push({ expiration });
  }
  signedUrls.push({
    name, clientId: credentials.clientId, accessToken: credentials.accessToken, ext: queue._extData || '',
    nowMs: NOW_MS, expSec: NOW_MS / 1000 + (expiration || 900),
    unsignedUrl: queue.buildUrl(queue.getArtifact, 'fN1SbArXTPSVFNUvaOlinQ', '0', 'private/build/target.tar.gz'),
    signedUrl: queue.buildSignedUrl(...args),
  });
}

write('hawk.json', { headers: hawkHeaders, server: hawkServer, bewits, bewitServer, payloadHashes, clientRequests, signedUrls });

// ---------------------------------------------------------------------------
// Temporary credentials

const tempCreds = [];
const tempCase = (name, opts) => {
  const out = taskcluster.createTemporaryCredentials(opts);
  const cert = JSON.parse(out.certificate);
  tempCreds.push({
    name,
    issuer: opts.credentials.clientId, issuerAccessToken: opts.credentials.accessToken,
    clientId: out.clientId, accessToken: out.accessToken, certificate: out.certificate,
    named: Boolean(opts.clientId), seed: cert.seed, start: cert.start, expiry: cert.expiry,
    scopes: cert.scopes, signature: cert.signature,
  });
};
tempCase('unnamed', { start: new Date(1438964811744), expiry: new Date(1439051211744), scopes: ['scope/asd:fhjdf/X', 'scope/asd:fhjdf/XYZ*'], credentials: { clientId: 'def/ghi@XXX', accessToken: 'tokenABCDEFGH' } });
tempCase('named', { clientId: 'abc/def/ghi', start: new Date(1438964811744), expiry: new Date(1439051211744), scopes: ['scope/asd:fhjdf/X', 'scope/asd:fhjdf/XYZ*'], credentials: { clientId: 'def/ghi@XXX', accessToken: 'tokenABCDEFGH' } });
tempCase('named task credentials', { clientId: 'task-client/abc/0/on/g/w/until/1700001200.5', start: new Date(NOW_MS), expiry: new Date(NOW_MS + 1200500), scopes: ['queue:reclaim-task:abc/0', 'queue:resolve-task:abc/0', 'queue:create-artifact:abc/0', 'secrets:get:x'], credentials: ROOT });
tempCase('unnamed empty scopes (JS form)', { start: new Date(NOW_MS), expiry: new Date(NOW_MS + 3600000), scopes: [], credentials: ROOT });
tempCase('named empty scopes (JS form)', { clientId: 'x/y', start: new Date(NOW_MS), expiry: new Date(NOW_MS + 3600000), scopes: [], credentials: ROOT });
tempCase('31 days', { clientId: 'long', start: new Date(NOW_MS), expiry: new Date(NOW_MS + 31 * 24 * 3600 * 1000), scopes: ['*'], credentials: ROOT });
write('tempcreds.json', tempCreds);

// ---------------------------------------------------------------------------
// Scopes

// Deterministic PRNG (mulberry32) for the generated cases.
const rng = (seed => () => {
  seed |= 0; seed = seed + 0x6D2B79F5 | 0;
  let t = Math.imul(seed ^ seed >>> 15, 1 | seed);
  t = t + Math.imul(t ^ t >>> 7, 61 | t) ^ t;
  return ((t ^ t >>> 14) >>> 0) / 4294967296;
})(20240501);
const pick = xs => xs[Math.floor(rng() * xs.length)];
const randScope = () => {
  const n = Math.floor(rng() * 5);
  let s = '';
  for (let i = 0; i < n; i++) {
    s += pick(['a', 'b', ':', '*', 'a', 'b']);
  }
  return s;
};
const randSet = () => Array.from({ length: Math.floor(rng() * 5) }, randScope);
const randExpr = depth => {
  const r = rng();
  if (depth === 0 || r < 0.5) {
    return randScope();
  }
  const children = Array.from({ length: Math.floor(rng() * 4) }, () => randExpr(depth - 1));
  return r < 0.75 ? { AllOf: children } : { AnyOf: children };
};

const satisfaction = [];
const satCase = (held, required, note) => {
  satisfaction.push({
    held, required,
    satisfied: scopes.satisfiesExpression(held, required),
    missing: scopes.removeGivenScopes(held, required),
    ...(note ? { note } : {}),
  });
};
// auth-artifacts-events.md §3.9.
const prio = lvl => `queue:create-task:${lvl}:p/w`;
const createTaskExpr = { AllOf: ['queue:create-task:project:none', 'queue:scheduler-id:-', { AnyOf: [prio('highest'), prio('very-high'), prio('high')] }] };
for (const [held, required] of [
  [['queue:get-task:abc'], 'queue:get-task:abc'],
  [['queue:get-task:abc'], 'queue:get-task:abcd'],
  [['queue:get-task:*'], 'queue:get-task:abc'],
  [['queue:get-task:*'], 'queue:get-task:'],
  [['queue:get-task:*'], 'queue:get-task'],
  [['queue:*'], 'queue:*'],
  [['queue:get-task:abc'], 'queue:get-task:*'],
  [['*'], 'anything:at:all'],
  [['*'], ''],
  [[], ''],
  [['a*b'], 'axb'],
  [['foo:**'], 'foo:*'],
  [['foo:**'], 'foo:abc'],
  [['Queue:get-task:*'], 'queue:get-task:x'],
  [['abc*'], { AnyOf: ['abcd'] }],
  [['abc*'], { AnyOf: [{ AllOf: ['abcdef'] }, 'def'] }],
  [['a'], { AllOf: ['a', 'b'] }],
  [[], { AllOf: [] }],
  [[], { AnyOf: [] }],
  [['x'], { AnyOf: [{ AllOf: [] }, 'y'] }],
  [['x'], { AllOf: [{ AnyOf: ['a', 'b'] }, 'c', 'x'] }],
  [[prio('high'), 'queue:scheduler-id:-', 'queue:create-task:project:none'], createTaskExpr],
  [[prio('low'), 'queue:scheduler-id:-', 'queue:create-task:project:none'], createTaskExpr],
  [['assume:role:x'], 'role-scope-granted-by-x'],
]) {
  satCase(held, required, 'spec 3.9');
}
satCase(['foo:**'], 'foo:*x');
satCase(['a'], { AnyOf: [{ AllOf: ['b', 'c'] }, { AnyOf: ['d'] }] });
satCase(['b'], { AllOf: [{ AnyOf: [{ AllOf: ['b', 'c'] }, 'd'] }] });
satCase([], { AllOf: [{ AllOf: [] }, { AnyOf: [] }] });
satCase(['queue:get-artifact:public/*'], { AllOf: ['queue:get-artifact:private/build.log'] });
for (let i = 0; i < 300; i++) {
  satCase(randSet(), randExpr(3));
}

const validScopes = ['', 'a', 'queue:get-task:*', ' ', '~', 'a\tb', '\u00e9', 'a\nb', '\x7f', '**'].map(s => ({ scope: s, valid: scopes.validScope(s) }));
const exprValidity = [
  'a', '', 'a\tb', { AllOf: [] }, { AnyOf: [] }, { AllOf: ['a', { AnyOf: ['b'] }] },
  { AnyOf: ['a'], AllOf: ['b'] }, {}, { OneOf: ['a'] }, { AllOf: ['a\nb'] }, 5, null, ['a'],
  { AllOf: 'a' }, { AllOf: [5] },
].map(expr => {
  let valid;
  try {
    valid = scopes.validExpression(expr);
  } catch (err) {
    valid = false;
  }
  return { expr, valid };
});

const sortNormalize = [];
const sortCase = input => {
  const sorted = [...input].sort(scopes.scopeCompare);
  sortNormalize.push({ input, sorted, normalized: scopes.normalizeScopeSet(sorted) });
};
sortCase(['b', 'a', 'a*', 'ab', '*', '', 'aa', 'a(']);
sortCase(['a', 'a*', 'ab', 'b']);
sortCase(['a**', 'a*', 'a*b', 'a', 'a**b']);
sortCase([]);
sortCase(['x', 'x', 'x']);
for (let i = 0; i < 100; i++) {
  sortCase(Array.from({ length: Math.floor(rng() * 8) }, randScope));
}

const merges = [];
const mergeCase = (a, b) => {
  const na = scopes.normalizeScopeSet([...a].sort(scopes.scopeCompare));
  const nb = scopes.normalizeScopeSet([...b].sort(scopes.scopeCompare));
  merges.push({ a: na, b: nb, merged: scopes.mergeScopeSets(na, nb) });
};
mergeCase(['a*', 'c'], ['ab', 'b', 'c', 'd*']);
mergeCase([], []);
mergeCase(['*'], ['a', 'b']);
for (let i = 0; i < 100; i++) {
  mergeCase(randSet(), randSet());
}

const stringify = [
  'a', { AllOf: ['queue:get-artifact:private/build.log'] }, { AnyOf: [] }, { AllOf: [{ AnyOf: ['a', 'b'] }, 'c<d>&"e\\'] },
].map(v => ({ value: v, json: JSON.stringify(v, null, 2) }));

write('scopes.json', { satisfaction, validScopes, exprValidity, sortNormalize, merges, stringify });
