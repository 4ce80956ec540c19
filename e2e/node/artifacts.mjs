// Artifacts through the official client, as a worker and its users see
// them: a claimed run creates s3, reference, link and error artifacts with
// the claim's credentials, uploads bytes to the putUrl with plain HTTP, and
// readers fetch them through getArtifact / latestArtifact / signed URLs,
// anonymously for public/ names. Run once per blob backend; HOPPER_BACKEND
// ("local" or "s3") says which, for the few backend-specific checks, and
// HOPPER_BLOB_URL_PREFIX where its upload and download URLs must point.
import http from 'node:http';
import https from 'node:https';
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { Writable } from 'node:stream';
import { taskcluster, assert, queue, taskDef, expectError, step, rootUrl } from './lib.mjs';

const backend = process.env.HOPPER_BACKEND || 'local';
const blobPrefix = process.env.HOPPER_BLOB_URL_PREFIX || `${rootUrl}/blobs/`;
const q = queue();
const anon = new taskcluster.Queue({ rootUrl, retries: 0 });
const tq = `e2e-${Date.now() % 100000}/artifacts`;
const worker = { workerGroup: 'e2e-group', workerId: 'e2e-artifacts' };
const expires = taskcluster.fromNowJSON('2 hours');

// rawGet fetches a URL without following redirects or decoding the body,
// so that stored bytes and headers are compared exactly as served.
function rawGet(url, headers = {}) {
  const mod = url.startsWith('https:') ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.get(url, { headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

// put uploads bytes to a putUrl the way generic-worker does: one PUT with
// the artifact's Content-Type and, for logs, Content-Encoding: gzip. fetch
// sets Content-Length from the buffer.
async function put(putUrl, body, contentType, contentEncoding) {
  const headers = { 'Content-Type': contentType };
  if (contentEncoding) headers['Content-Encoding'] = contentEncoding;
  const res = await fetch(putUrl, { method: 'PUT', headers, body });
  const text = await res.text();
  return { status: res.status, text };
}

async function createAndUpload(cq, taskId, runId, name, body, contentType, contentEncoding) {
  const res = await cq.createArtifact(taskId, runId, name, {
    storageType: 's3', expires, contentType, contentLength: body.length,
  });
  assert.equal(res.storageType, 's3');
  assert.equal(res.contentType, contentType);
  assert.ok(res.putUrl.startsWith(blobPrefix), `putUrl ${res.putUrl} is not under ${blobPrefix}`);
  // The putUrl expiry is about 45 minutes ahead, not the artifact's.
  const ttl = new Date(res.expires) - Date.now();
  assert.ok(ttl > 40 * 60e3 && ttl <= 46 * 60e3, `putUrl expiry ${res.expires} is not ~45 min ahead`);
  const up = await put(res.putUrl, body, contentType, contentEncoding);
  assert.ok(up.status >= 200 && up.status < 300, `PUT ${name}: HTTP ${up.status} ${up.text}`);
  return res;
}

// fetchViaGetArtifact asks getArtifact where the data is (the JS client
// returns the 303's JSON body) and downloads it byte for byte.
async function fetchViaGetArtifact(client, taskId, runId, name) {
  const loc = await client.getArtifact(taskId, runId, name);
  assert.ok(loc.url.startsWith(blobPrefix), `getArtifact ${name} url ${loc.url} is not under ${blobPrefix}`);
  const got = await rawGet(loc.url);
  assert.equal(got.status, 200, `GET ${name} data: HTTP ${got.status} ${got.body}`);
  return { loc, got };
}

async function claimOne(taskId) {
  const res = await q.claimWork(tq, { ...worker, tasks: 1 });
  assert.equal(res.tasks.length, 1, 'claimWork returned no task');
  assert.equal(res.tasks[0].status.taskId, taskId);
  return res.tasks[0];
}

// ---- a running task and its claim ----------------------------------------
const taskId = taskcluster.slugid();
await q.createTask(taskId, taskDef(tq));
const claim = await claimOne(taskId);
const cq = queue(claim.credentials);
step('task created and claimed');

// ---- s3: a gzip-encoded log, a binary output, a private file -----------------
const logText = Buffer.from(Array.from({ length: 2000 }, (_, i) => `line ${i}: build step ok\n`).join(''));
const logGz = zlib.gzipSync(logText);
const logCT = 'text/plain; charset=utf-8';
await createAndUpload(cq, taskId, 0, 'public/logs/live.log', logGz, logCT, 'gzip');

const bin = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), crypto.randomBytes(300 * 1024)]);
const binCT = 'application/octet-stream';
await createAndUpload(cq, taskId, 0, 'public/build/output.bin', bin, binCT);

const secret = Buffer.from(`private data ${crypto.randomUUID()}\n`);
await createAndUpload(cq, taskId, 0, 'private/secret.txt', secret, 'text/plain');

// An empty artifact is legal (an empty log, a touched file).
await createAndUpload(cq, taskId, 0, 'public/empty.txt', Buffer.alloc(0), 'text/plain');

// A name that needs escaping in URLs and file systems still round-trips;
// names are printable ASCII, anything else is refused before any work.
const oddName = 'public/odd dir/../%2F%/#?&+=~ .txt';
await expectError(() => cq.createArtifact(taskId, 0, 'public/ü.txt', { storageType: 's3', expires, contentType: 'text/plain' }),
  400, 'InvalidRequestArguments');
const oddBody = Buffer.from('odd name body\n');
await createAndUpload(cq, taskId, 0, oddName, oddBody, 'text/plain');
step('s3 artifacts created and uploaded with plain PUTs');

// The gzip log comes back with its encoding, type and compressed length.
{
  const { loc, got } = await fetchViaGetArtifact(anon, taskId, 0, 'public/logs/live.log');
  assert.equal(loc.storageType, 's3');
  assert.ok(got.body.equals(logGz), 'gzip log bytes differ');
  assert.equal(got.headers['content-encoding'], 'gzip');
  assert.equal(got.headers['content-type'], logCT);
  assert.equal(Number(got.headers['content-length']), logGz.length);
  assert.ok(zlib.gunzipSync(got.body).equals(logText));
}
// Binary output: exact bytes, length and (local backend) the sha256 ETag.
{
  const { got } = await fetchViaGetArtifact(anon, taskId, 0, 'public/build/output.bin');
  assert.ok(got.body.equals(bin), 'binary bytes differ');
  assert.equal(got.headers['content-type'], binCT);
  assert.equal(Number(got.headers['content-length']), bin.length);
  if (backend === 'local') {
    assert.equal(got.headers.etag, `"${crypto.createHash('sha256').update(bin).digest('hex')}"`);
  }
}
{
  const { got } = await fetchViaGetArtifact(anon, taskId, 0, 'public/empty.txt');
  assert.equal(got.body.length, 0);
  const odd = await fetchViaGetArtifact(anon, taskId, 0, oddName);
  assert.ok(odd.got.body.equals(oddBody), 'odd-name bytes differ');
}
step('getArtifact URLs serve the uploaded bytes, Content-Type, Content-Encoding and Content-Length');

// The raw getArtifact reply: 303, Location, storage-type header, JSON body;
// no credentials needed for public/ names (anonymous role).
{
  const url = anon.buildUrl(anon.getArtifact, taskId, 0, 'public/build/output.bin');
  const res = await rawGet(url);
  assert.equal(res.status, 303);
  assert.equal(res.headers['x-taskcluster-artifact-storage-type'], 's3');
  assert.match(res.headers['content-type'], /^application\/json/);
  const body = JSON.parse(res.body);
  assert.equal(body.storageType, 's3');
  assert.equal(body.url, res.headers.location);
  const data = await rawGet(res.headers.location);
  assert.ok(data.body.equals(bin));
}
step('getArtifact answers 303 with Location and a JSON body');

// The official downloader (got, which decodes gzip) gets the log text.
{
  const chunks = [];
  const ct = await taskcluster.downloadArtifact({
    taskId, runId: 0, name: 'public/logs/live.log', queue: anon, retries: 0,
    streamFactory: async () => new Writable({ write(c, _e, cb) { chunks.push(c); cb(); } }),
  });
  assert.equal(ct, logCT);
  assert.ok(Buffer.concat(chunks).equals(logText), 'downloadArtifact text differs');
}
step('taskcluster.downloadArtifact');

// ---- private names: scopes, anonymous refusal, signed URLs ---------------------
await expectError(() => anon.getArtifact(taskId, 0, 'private/secret.txt'), 403, 'InsufficientScopes');
await expectError(() => anon.getLatestArtifact(taskId, 'private/secret.txt'), 403, 'InsufficientScopes');
await expectError(() => anon.artifact(taskId, 0, 'private/secret.txt'), 403, 'InsufficientScopes');
{
  const { got } = await fetchViaGetArtifact(q, taskId, 0, 'private/secret.txt');
  assert.ok(got.body.equals(secret));
  // A bewit-signed getArtifact URL works with no credentials attached.
  const signed = q.buildSignedUrl(q.getArtifact, taskId, 0, 'private/secret.txt', { expiration: 600 });
  const res = await rawGet(signed);
  assert.equal(res.status, 303, `signed getArtifact: HTTP ${res.status} ${res.body}`);
  const data = await rawGet(res.headers.location);
  assert.equal(data.status, 200);
  assert.ok(data.body.equals(secret));
  // Tampering with the bewit is refused.
  const bad = signed.replace(/bewit=([^&]+)/, (_m, b) => `bewit=${b.slice(0, -4)}AAAA`);
  assert.notEqual(bad, signed);
  const denied = await rawGet(bad);
  assert.equal(denied.status, 401, `tampered bewit: HTTP ${denied.status}`);
}
step('private artifacts need queue:get-artifact:<name>; buildSignedUrl grants it');

// ---- reference, link, error ------------------------------------------------------
const refURL = 'https://downloads.example.com/builds/42/output.tar.zst?sig=abc';
assert.deepEqual(await cq.createArtifact(taskId, 0, 'public/reference', {
  storageType: 'reference', expires, url: refURL, contentType: 'application/zstd',
}), { storageType: 'reference' });
assert.deepEqual(await cq.createArtifact(taskId, 0, 'public/link', {
  storageType: 'link', expires, artifact: 'public/build/output.bin',
}), { storageType: 'link' });
await cq.createArtifact(taskId, 0, 'public/link-to-private', { storageType: 'link', expires, artifact: 'private/secret.txt' });
const errMsg = 'the file dist/app.zip was not found on the worker';
assert.deepEqual(await cq.createArtifact(taskId, 0, 'public/missing.zip', {
  storageType: 'error', expires, reason: 'file-missing-on-worker', message: errMsg,
}), { storageType: 'error' });
step('reference, link and error artifacts created');

{
  const loc = await anon.getArtifact(taskId, 0, 'public/reference');
  assert.deepEqual(loc, { storageType: 'reference', url: refURL });
  const raw = await rawGet(anon.buildUrl(anon.getArtifact, taskId, 0, 'public/reference'));
  assert.equal(raw.status, 303);
  assert.equal(raw.headers.location, refURL);
  assert.equal(raw.headers['x-taskcluster-artifact-storage-type'], 'reference');
}
{
  // A link resolves to its target: same data, storage type of the target.
  const { loc, got } = await fetchViaGetArtifact(anon, taskId, 0, 'public/link');
  assert.equal(loc.storageType, 's3');
  assert.ok(got.body.equals(bin));
  // Every name on the chain needs the scope: public → private is refused.
  await expectError(() => anon.getArtifact(taskId, 0, 'public/link-to-private'), 403, 'InsufficientScopes');
  const viaRoot = await fetchViaGetArtifact(q, taskId, 0, 'public/link-to-private');
  assert.ok(viaRoot.got.body.equals(secret));
}
{
  const err = await expectError(() => anon.getArtifact(taskId, 0, 'public/missing.zip'), 424);
  assert.deepEqual(err.body, { reason: 'file-missing-on-worker', message: errMsg });
  const raw = await rawGet(anon.buildUrl(anon.getArtifact, taskId, 0, 'public/missing.zip'));
  assert.equal(raw.status, 424);
  assert.equal(raw.headers['x-taskcluster-artifact-storage-type'], 'error');
  assert.deepEqual(JSON.parse(raw.body), { reason: 'file-missing-on-worker', message: errMsg });
  // artifact (content) describes it with 200 instead.
  assert.deepEqual(await anon.artifact(taskId, 0, 'public/missing.zip'),
    { storageType: 'error', reason: 'file-missing-on-worker', message: errMsg });
  // The official downloader surfaces the reason.
  try {
    await taskcluster.downloadArtifact({ taskId, runId: 0, name: 'public/missing.zip', queue: anon, retries: 0, streamFactory: async () => new Writable() });
    assert.fail('downloadArtifact of an error artifact succeeded');
  } catch (e) {
    assert.equal(e.reason, 'file-missing-on-worker');
  }
}
step('reference redirects verbatim, link follows with scopes per hop, error answers 424 {reason,message}');

// ---- artifact / latestArtifact / getLatestArtifact ----------------------------------
{
  const c = await anon.artifact(taskId, 0, 'public/build/output.bin');
  assert.equal(c.storageType, 's3');
  assert.ok((await rawGet(c.url)).body.equals(bin));
  const latest = await anon.latestArtifact(taskId, 'public/logs/live.log');
  assert.equal(latest.storageType, 's3');
  assert.ok((await rawGet(latest.url)).body.equals(logGz));
  const gl = await anon.getLatestArtifact(taskId, 'public/link');
  assert.ok((await rawGet(gl.url)).body.equals(bin));
  assert.deepEqual(await anon.latestArtifact(taskId, 'public/reference'), { storageType: 'reference', url: refURL });
}
step('artifact, latestArtifact and getLatestArtifact');

// ---- listing and info -------------------------------------------------------------
const allNames = ['private/secret.txt', 'public/build/output.bin', 'public/empty.txt', 'public/link',
  'public/link-to-private', 'public/logs/live.log', 'public/missing.zip', oddName, 'public/reference'].sort();
{
  const seen = [];
  let token;
  let pages = 0;
  do {
    const page = await q.listArtifacts(taskId, 0, { limit: 2, ...(token ? { continuationToken: token } : {}) });
    assert.ok(page.artifacts.length <= 2);
    seen.push(...page.artifacts);
    token = page.continuationToken;
    pages++;
  } while (token);
  assert.deepEqual(seen.map((a) => a.name), allNames);
  assert.equal(pages, Math.ceil(allNames.length / 2));
  const byName = Object.fromEntries(seen.map((a) => [a.name, a]));
  assert.deepEqual(byName['public/build/output.bin'], {
    storageType: 's3', name: 'public/build/output.bin', expires, contentType: binCT, contentLength: bin.length,
  });
  assert.equal(byName['public/link'].storageType, 'link');
  assert.equal(byName['public/link'].contentType, 'application/binary');
  assert.equal(byName['public/missing.zip'].storageType, 'error');
  const latest = await q.listLatestArtifacts(taskId);
  assert.deepEqual(latest.artifacts.map((a) => a.name), allNames);
  assert.equal(latest.continuationToken, undefined);
}
{
  const info = await q.artifactInfo(taskId, 0, 'public/logs/live.log');
  assert.deepEqual(info, { storageType: 's3', name: 'public/logs/live.log', expires, contentType: logCT, contentLength: logGz.length });
  // Links are not followed by artifactInfo.
  const li = await q.latestArtifactInfo(taskId, 'public/link');
  assert.equal(li.storageType, 'link');
  await expectError(() => q.artifactInfo(taskId, 0, 'public/nope'), 404, 'ResourceNotFound');
  await expectError(() => anon.getArtifact(taskId, 0, 'public/nope'), 404, 'ResourceNotFound');
  await expectError(() => q.listArtifacts(taskId, 3), 404, 'ResourceNotFound');
}
step('listArtifacts paging, listLatestArtifacts, artifactInfo');

// ---- re-creation, object, validation ---------------------------------------------
{
  // An identical s3 re-create succeeds with a fresh putUrl; a re-upload wins.
  const again = await cq.createArtifact(taskId, 0, 'public/build/output.bin', {
    storageType: 's3', expires, contentType: binCT, contentLength: bin.length,
  });
  assert.equal(again.storageType, 's3');
  const bin2 = crypto.randomBytes(bin.length);
  const up = await put(again.putUrl, bin2, binCT);
  assert.ok(up.status >= 200 && up.status < 300, `re-upload: HTTP ${up.status} ${up.text}`);
  const { got } = await fetchViaGetArtifact(anon, taskId, 0, 'public/build/output.bin');
  assert.ok(got.body.equals(bin2), 'last upload did not win');
  // Identical error and link re-creates are idempotent too.
  await cq.createArtifact(taskId, 0, 'public/missing.zip', { storageType: 'error', expires, reason: 'file-missing-on-worker', message: errMsg });
  await cq.createArtifact(taskId, 0, 'public/link', { storageType: 'link', expires, artifact: 'public/build/output.bin' });
  // A reference may be replaced by a link.
  await cq.createArtifact(taskId, 0, 'public/reference', { storageType: 'link', expires, artifact: 'public/empty.txt' });
  assert.equal((await q.artifactInfo(taskId, 0, 'public/reference')).storageType, 'link');
  await cq.createArtifact(taskId, 0, 'public/reference', { storageType: 'link', expires, artifact: 'public/empty.txt' });
}
{
  const conflicts = [
    ['public/build/output.bin', { storageType: 's3', expires, contentType: 'text/plain' }],
    ['public/build/output.bin', { storageType: 'error', expires, reason: 'file-missing-on-worker', message: 'x' }],
    ['public/missing.zip', { storageType: 'error', expires, reason: 'file-missing-on-worker', message: 'other' }],
    ['public/link', { storageType: 'link', expires, artifact: 'public/empty.txt' }],
    ['public/logs/live.log', { storageType: 's3', expires: taskcluster.fromNowJSON('1 hour'), contentType: logCT }],
  ];
  for (const [name, body] of conflicts) {
    const err = await expectError(() => cq.createArtifact(taskId, 0, name, body), 409, 'RequestConflict');
    assert.match(err.message, /Artifact already exists with different properties/);
  }
}
step('identical re-create succeeds, different properties conflict (409)');

{
  // object artifacts are served (objects.mjs covers them); an unknown
  // storage type is refused by the schema.
  await expectError(() => cq.createArtifact(taskId, 0, 'public/bad', { storageType: 'azure', expires, contentType: 'text/plain' }), 400, 'InputValidationError');
  // Unknown run and unknown task are input errors, not 404s.
  let e = await expectError(() => q.createArtifact(taskId, 1, 'public/x', { storageType: 's3', expires, contentType: 'text/plain' }), 400, 'InputError');
  assert.match(e.message, /Run not found/);
  e = await expectError(() => q.createArtifact(taskcluster.slugid(), 0, 'public/x', { storageType: 's3', expires, contentType: 'text/plain' }), 400, 'InputError');
  assert.match(e.message, /Task not found/);
  // An artifact may not outlive its task.
  e = await expectError(() => cq.createArtifact(taskId, 0, 'public/late', {
    storageType: 's3', expires: taskcluster.fromNowJSON('2 years'), contentType: 'text/plain',
  }), 400, 'InputError');
  assert.match(e.message, /after the task expiration/);
  // The claim's credentials cover only its own run.
  await expectError(() => cq.createArtifact(taskcluster.slugid(), 0, 'public/x', { storageType: 's3', expires, contentType: 'text/plain' }), 403, 'InsufficientScopes');
}
step('unknown storage type → 400, unknown run/task → 400, expires beyond the task → 400, other tasks → 403');

{
  // The upload must carry the artifact's Content-Type.
  const res = await cq.createArtifact(taskId, 0, 'public/typed.txt', { storageType: 's3', expires, contentType: 'text/plain' });
  const wrong = await put(res.putUrl, Buffer.from('x'), 'text/html');
  assert.ok(wrong.status >= 400 && wrong.status < 500, `PUT with another Content-Type: HTTP ${wrong.status}`);
}
step('putUrl refuses another Content-Type');

// ---- upload window -----------------------------------------------------------------
await cq.reportCompleted(taskId, 0);
{
  const err = await expectError(() => cq.createArtifact(taskId, 0, 'public/after.txt', {
    storageType: 's3', expires, contentType: 'text/plain',
  }), 409, 'RequestConflict');
  assert.match(err.message, /Artifacts cannot be created for a task after it is resolved/);
  await expectError(() => q.createArtifact(taskId, 0, 'public/after-error', {
    storageType: 'error', expires, reason: 'file-missing-on-worker', message: 'late',
  }), 409, 'RequestConflict');
  // Reading still works after completion.
  const { got } = await fetchViaGetArtifact(anon, taskId, 0, 'public/logs/live.log');
  assert.ok(got.body.equals(logGz));
}
step('no artifacts after reportCompleted (409)');

{
  const failed = taskcluster.slugid();
  await q.createTask(failed, taskDef(tq));
  const fc = await claimOne(failed);
  await queue(fc.credentials).reportFailed(failed, 0);
  await expectError(() => queue(fc.credentials).createArtifact(failed, 0, 'public/after.txt', {
    storageType: 's3', expires, contentType: 'text/plain',
  }), 409, 'RequestConflict');
}
step('no artifacts after reportFailed (409)');

{
  // After an exception the worker may still upload its logs for a while.
  const exc = taskcluster.slugid();
  await q.createTask(exc, taskDef(tq, { retries: 0 }));
  const ec = await claimOne(exc);
  const eq = queue(ec.credentials);
  const st = await eq.reportException(exc, 0, { reason: 'malformed-payload' });
  assert.equal(st.status.state, 'exception');
  const late = Buffer.from('log written after the exception\n');
  await createAndUpload(eq, exc, 0, 'public/logs/live_backing.log', late, 'text/plain');
  const { got } = await fetchViaGetArtifact(anon, exc, 0, 'public/logs/live_backing.log');
  assert.ok(got.body.equals(late));
  const latest = await anon.latestArtifact(exc, 'public/logs/live_backing.log');
  assert.ok((await rawGet(latest.url)).body.equals(late));
}
step('artifacts may still be created after reportException');

console.log(`artifacts (${backend}): all passed`);
