// The Object service and object artifacts through the official client: its
// upload() and download() helpers against the Object API, scopes, hashes,
// unfinished uploads and expiry; then a claimed run that creates an object
// artifact, uploads it with the credentials createArtifact answers,
// finishes it, and readers fetching it with downloadArtifact(), artifact(),
// getArtifact's redirect and the listings. Run once per blob backend
// (HOPPER_BACKEND says which).
import crypto from 'node:crypto';
import { Writable } from 'node:stream';
import { Readable } from 'node:stream';
import { taskcluster, assert, queue, taskDef, expectError, step, rootUrl, credentialsFromEnv } from './lib.mjs';

const backend = process.env.HOPPER_BACKEND || 'local';
const root = credentialsFromEnv();
const object = new taskcluster.Object({ rootUrl, credentials: root, retries: 0 });
const q = queue();
const anon = new taskcluster.Queue({ rootUrl, retries: 0 });
const run = `${backend}-${Date.now()}`;
const projectId = 'e2e-objects';
const expires = taskcluster.fromNow('2 hours');

// sink collects a download into a buffer.
function sink() {
  const chunks = [];
  const stream = new Writable({ write(chunk, _enc, cb) { chunks.push(chunk); cb(); } });
  return { factory: async () => stream, bytes: () => Buffer.concat(chunks) };
}

// reset returns a streamFactory for bytes that can be read again (upload
// reads the stream once for the hashes and once for the PUT).
const source = (bytes) => async () => Readable.from([bytes]);

async function upload(name, bytes, { client = object, contentType = 'application/octet-stream', uploadId } = {}) {
  await taskcluster.upload({
    projectId, name, contentType, contentLength: bytes.length, expires, object: client,
    streamFactory: source(bytes), uploadId, retries: 0,
  });
}

async function download(name, client = object) {
  const s = sink();
  const contentType = await taskcluster.download({ name, object: client, streamFactory: s.factory, retries: 0 });
  return { bytes: s.bytes(), contentType };
}

const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex');
const sha512 = (b) => crypto.createHash('sha512').update(b).digest('hex');

// 1. upload() and download(): small objects go inline, larger ones
// through a putUrl; the bytes, hashes and content type come back.
for (const [label, size] of [['inline', 1000], ['empty', 0], ['putUrl', 300 * 1024]]) {
  const name = `${run}/${label}.bin`;
  const bytes = crypto.randomBytes(size);
  await upload(name, bytes, { contentType: 'application/x-test' });
  const got = await download(name);
  assert.ok(got.bytes.equals(bytes), `${label}: downloaded bytes differ`);
  assert.equal(got.contentType, 'application/x-test');
  const meta = await object.object(name);
  assert.equal(meta.projectId, projectId);
  assert.equal(meta.hashes.sha256, sha256(bytes));
  assert.equal(meta.hashes.sha512, sha512(bytes));
  assert.equal(new Date(meta.expires).getTime(), new Date(expires.toJSON()).getTime());
  // simple: a signed URL of the download method redirects to the data.
  const simple = await object.startDownload(name, { acceptDownloadMethods: { simple: true } });
  assert.equal(simple.method, 'simple');
  const res = await fetch(object.buildSignedUrl(object.download, name, { expiration: 600 }));
  assert.equal(res.status, 200);
  assert.ok(Buffer.from(await res.arrayBuffer()).equals(bytes), `${label}: simple download differs`);
}
step('upload() and download(): dataInline, empty and putUrl objects, metadata, simple downloads');

// 1b. Taskcluster's Go client (generic-worker) PUTs a file without a
// Content-Length (chunked); hopper's own blob store takes that for objects.
if (backend === 'local') {
  const name = `${run}/chunked.bin`;
  const bytes = crypto.randomBytes(100 * 1024);
  const uploadId = taskcluster.slugid();
  const res = await object.createUpload(name, {
    projectId, uploadId, expires, proposedUploadMethods: { putUrl: { contentType: 'application/octet-stream', contentLength: bytes.length } },
  });
  const headers = { ...res.uploadMethod.putUrl.headers };
  delete headers['Content-Length'];
  const put = await fetch(res.uploadMethod.putUrl.url, { method: 'PUT', headers, body: Readable.toWeb(Readable.from([bytes])), duplex: 'half' });
  assert.ok(put.ok, `chunked PUT: ${put.status}`);
  await object.finishUpload(name, { projectId, uploadId, hashes: { sha256: sha256(bytes) } });
  assert.ok((await download(name)).bytes.equals(bytes), 'chunked upload differs');
  step('a chunked putUrl upload (as the Go client sends files)');
}

// 2. Negotiation: no acceptable method is 406; proposing no upload method
// only locks the upload in.
{
  const name = `${run}/negotiation`;
  await upload(name, Buffer.from('x'));
  await expectError(() => object.startDownload(name, { acceptDownloadMethods: {} }), 406, 'NoMatchingMethod');
}
step('startDownload with no acceptable method answers 406');

// 3. Scopes: upload needs object:upload:<projectId>:<name>, download
// object:download:<name>.
{
  const limited = (scopes) => new taskcluster.Object({
    rootUrl, retries: 0,
    credentials: taskcluster.createTemporaryCredentials({ scopes, expiry: taskcluster.fromNow('1 hour'), credentials: root }),
  });
  const uploader = limited([`object:upload:${projectId}:${run}/scoped/*`]);
  await upload(`${run}/scoped/ok`, Buffer.from('allowed'), { client: uploader });
  await expectError(() => upload(`${run}/elsewhere`, Buffer.from('no'), { client: uploader }), 403, 'InsufficientScopes');
  await expectError(() => taskcluster.upload({
    projectId: 'other-project', name: `${run}/scoped/x`, contentType: 'text/plain', contentLength: 1, expires,
    object: uploader, streamFactory: source(Buffer.from('y')), retries: 0,
  }), 403, 'InsufficientScopes');
  await expectError(() => download(`${run}/scoped/ok`, uploader), 403, 'InsufficientScopes');
  const reader = limited([`object:download:${run}/scoped/*`]);
  assert.equal((await download(`${run}/scoped/ok`, reader)).bytes.toString(), 'allowed');
  const anonObject = new taskcluster.Object({ rootUrl, retries: 0 });
  await expectError(() => anonObject.object(`${run}/scoped/ok`), 403, 'InsufficientScopes');
}
step('scopes: object:upload:<projectId>:<name> and object:download:<name>');

// 4. Hashes: downloaders verify them, so a wrong hash fails the download;
// hashes may be added but never changed.
{
  const name = `${run}/bad-hash`;
  const bytes = Buffer.from('the real bytes');
  const uploadId = taskcluster.slugid();
  const res = await object.createUpload(name, {
    projectId, uploadId, expires, proposedUploadMethods: { putUrl: { contentType: 'text/plain', contentLength: bytes.length } },
  });
  assert.ok(res.uploadMethod.putUrl, 'putUrl agreed');
  const put = await fetch(res.uploadMethod.putUrl.url, { method: 'PUT', headers: res.uploadMethod.putUrl.headers, body: bytes });
  assert.ok(put.ok, `PUT: ${put.status}`);
  const wrong = sha256(Buffer.from('other bytes'));
  await object.finishUpload(name, { projectId, uploadId, hashes: { sha256: wrong } });
  await assert.rejects(() => download(name), /Computed sha256 hash does not match/);
  // Repeating finishUpload with the same hash is fine; another value or a
  // new algorithm after finishing conflicts.
  await object.finishUpload(name, { projectId, uploadId, hashes: { sha256: wrong } });
  await expectError(() => object.finishUpload(name, { projectId, uploadId, hashes: { sha256: sha256(bytes) } }), 409, 'RequestConflict');
  await expectError(() => object.finishUpload(name, { projectId, uploadId, hashes: { sha512: sha512(bytes) } }), 409, 'RequestConflict');
  // Malformed hashes never get in.
  await expectError(() => object.createUpload(`${run}/malformed`, {
    projectId, uploadId: taskcluster.slugid(), expires, hashes: { sha256: 'abc' }, proposedUploadMethods: {},
  }), 400, 'InputValidationError');
  // A content type that cannot travel in an HTTP header is the caller's
  // mistake, whichever method carries it, and leaves nothing behind.
  for (const [contentType, code] of [['text/\u0000plain', 'InputValidationError'], ['text/plain\r\nX-Evil: 1', 'InputValidationError'], ['', 'InputError']]) {
    const bad = `${run}/bad-content-type`;
    await expectError(() => object.createUpload(bad, { projectId, uploadId: taskcluster.slugid(), expires,
      proposedUploadMethods: { dataInline: { contentType, objectData: 'aGk=' } } }), 400, code);
    await expectError(() => object.createUpload(bad, { projectId, uploadId: taskcluster.slugid(), expires,
      proposedUploadMethods: { putUrl: { contentType, contentLength: 2 } } }), 400, code);
    await expectError(() => object.object(bad), 404, 'ResourceNotFound');
  }

  // Hashes named at createUpload must agree with those at finishUpload.
  const amended = `${run}/amended`;
  const id2 = taskcluster.slugid();
  await object.createUpload(amended, {
    projectId, uploadId: id2, expires, hashes: { sha256: sha256(bytes) },
    proposedUploadMethods: { dataInline: { contentType: 'text/plain', objectData: bytes.toString('base64') } },
  });
  await expectError(() => object.finishUpload(amended, { projectId, uploadId: id2, hashes: { sha256: wrong } }), 409, 'RequestConflict');
  await object.finishUpload(amended, { projectId, uploadId: id2, hashes: { sha512: sha512(bytes) } });
  const meta = await object.object(amended);
  assert.deepEqual(meta.hashes, { sha256: sha256(bytes), sha512: sha512(bytes) });
  assert.ok((await download(amended)).bytes.equals(bytes));
}
step('hashes: a wrong one fails download(); they may be amended, never changed');

// 5. Unfinished uploads: invisible to readers, owned by their uploadId,
// and not finishable before the data arrived.
{
  const name = `${run}/unfinished`;
  const uploadId = taskcluster.slugid();
  await object.createUpload(name, { projectId, uploadId, expires, proposedUploadMethods: {} });
  await expectError(() => object.object(name), 404, 'ResourceNotFound');
  await expectError(() => object.startDownload(name, { acceptDownloadMethods: { getUrl: true } }), 404, 'ResourceNotFound');
  await expectError(() => object.createUpload(name, { projectId, uploadId: taskcluster.slugid(), expires, proposedUploadMethods: {} }), 409, 'RequestConflict');
  await expectError(() => object.createUpload(name, { projectId: 'other', uploadId, expires, proposedUploadMethods: {} }), 409, 'RequestConflict');
  await expectError(() => object.createUpload(name, { projectId, uploadId, expires: taskcluster.fromNow('3 hours'), proposedUploadMethods: {} }), 409, 'RequestConflict');
  await expectError(() => object.finishUpload(name, { projectId, uploadId: taskcluster.slugid() }), 409, 'RequestConflict');
  await expectError(() => object.finishUpload(name, { projectId, uploadId }), 400, 'InputError');
  await expectError(() => object.finishUpload(`${run}/never-created`, { projectId, uploadId }), 404, 'ResourceNotFound');
  // The same uploadId may renew the upload and finish it.
  await upload(name, Buffer.from('finally'), { uploadId });
  assert.equal((await download(name)).bytes.toString(), 'finally');
  // Once finished, the name is taken for good.
  await expectError(() => object.createUpload(name, { projectId, uploadId, expires, proposedUploadMethods: {} }), 409, 'RequestConflict');
}
step('unfinished uploads: invisible, owned by their uploadId, need their data');

// 6. Expiry: an expired object is gone, and so is its data once the
// expiration sweep ran (the server runs it every second here).
{
  const name = `${run}/short-lived`;
  const bytes = Buffer.from('soon gone');
  await taskcluster.upload({
    projectId, name, contentType: 'text/plain', contentLength: bytes.length, expires: taskcluster.fromNow('3 seconds'),
    object, streamFactory: source(bytes), retries: 0,
  });
  const dl = await object.startDownload(name, { acceptDownloadMethods: { getUrl: true } });
  assert.equal(dl.method, 'getUrl');
  assert.ok(new Date(dl.expires) > new Date());
  assert.equal((await fetch(dl.url)).status, 200);
  await new Promise((r) => setTimeout(r, 5000));
  await expectError(() => object.object(name), 404, 'ResourceNotFound');
  let status = 0;
  for (let i = 0; i < 50; i++) {
    status = (await fetch(dl.url)).status;
    if (status === 404) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(status, 404, 'the data of an expired object is deleted');
  await expectError(() => object.createUpload(`${run}/in-the-past`, {
    projectId, uploadId: taskcluster.slugid(), expires: taskcluster.fromNow('-1 minute'), proposedUploadMethods: {},
  }), 400, 'InputError');
}
step('expiry: expired objects and their data go');

// 7. Object artifacts: createArtifact answers the object's name, uploadId
// and upload credentials; the worker uploads with upload(), finishes the
// artifact, and readers get it with downloadArtifact().
{
  const tq = `e2e-${Date.now() % 100000}/objects`;
  const taskId = taskcluster.slugid();
  await q.createTask(taskId, taskDef(tq, { projectId: 'e2e-proj', expires: taskcluster.fromNowJSON('1 day') }));
  const claim = (await q.claimWork(tq, { workerGroup: 'g', workerId: 'w', tasks: 1 })).tasks[0];
  assert.equal(claim.status.taskId, taskId);
  const wq = new taskcluster.Queue({ rootUrl, credentials: claim.credentials, retries: 0 });

  const put = async (name, bytes, contentType) => {
    const res = await wq.createArtifact(taskId, 0, name, { storageType: 'object', expires, contentType, contentLength: bytes.length });
    assert.equal(res.storageType, 'object');
    assert.equal(res.name, `t/${taskId}/0/${name}`);
    assert.equal(res.projectId, 'e2e-proj');
    assert.ok(res.uploadId);
    assert.ok(res.credentials.certificate, 'temporary upload credentials');
    // A repeat (lost answer) keeps the uploadId.
    const again = await wq.createArtifact(taskId, 0, name, { storageType: 'object', expires, contentType });
    assert.equal(again.uploadId, res.uploadId);
    const uploader = new taskcluster.Object({ rootUrl, credentials: res.credentials, retries: 0 });
    // The upload credentials cover this object only.
    await expectError(() => taskcluster.upload({
      projectId: res.projectId, name: `t/${taskId}/0/other`, contentType, contentLength: 1, expires, object: uploader,
      streamFactory: source(Buffer.from('x')), retries: 0,
    }), 403, 'InsufficientScopes');
    // finishArtifact before the object is finished is refused.
    await expectError(() => wq.finishArtifact(taskId, 0, name, { uploadId: res.uploadId }), 400, 'InputError');
    await expectError(() => wq.finishArtifact(taskId, 0, name, { uploadId: taskcluster.slugid() }), 400, 'InputError');
    await taskcluster.upload({
      projectId: res.projectId, name: res.name, contentType, contentLength: bytes.length, expires, object: uploader,
      streamFactory: source(bytes), uploadId: res.uploadId, retries: 0,
    });
    await wq.finishArtifact(taskId, 0, name, { uploadId: res.uploadId });
    await wq.finishArtifact(taskId, 0, name, { uploadId: res.uploadId }); // idempotent
    return res;
  };
  const big = crypto.randomBytes(64 * 1024);
  await put('public/build/big.bin', big, 'application/octet-stream');
  await put('private/secret.txt', Buffer.from('secret'), 'text/plain');
  await expectError(() => wq.createArtifact(taskId, 0, 'public/build/big.bin', { storageType: 'object', expires, contentType: 'text/plain' }), 409, 'RequestConflict');

  // downloadArtifact() with the run and latest.
  for (const runId of [0, undefined]) {
    const s = sink();
    const ct = await taskcluster.downloadArtifact({ taskId, runId, name: 'public/build/big.bin', queue: anon, streamFactory: s.factory, retries: 0 });
    assert.ok(s.bytes().equals(big), 'downloadArtifact bytes differ');
    assert.equal(ct, 'application/octet-stream');
  }
  const content = await anon.artifact(taskId, 0, 'public/build/big.bin');
  assert.equal(content.storageType, 'object');
  assert.equal(content.name, `t/${taskId}/0/public/build/big.bin`);
  assert.ok(content.credentials.certificate);
  const latest = await anon.latestArtifact(taskId, 'public/build/big.bin');
  assert.equal(latest.name, content.name);
  // Private artifacts need the get-artifact scope; the queue's download
  // credentials then cover the object.
  await expectError(() => anon.artifact(taskId, 0, 'private/secret.txt'), 403, 'InsufficientScopes');
  const s = sink();
  await taskcluster.downloadArtifact({ taskId, runId: 0, name: 'private/secret.txt', queue: q, streamFactory: s.factory, retries: 0 });
  assert.equal(s.bytes().toString(), 'secret');

  // getArtifact redirects to the data.
  const res = await fetch(anon.buildUrl(anon.getArtifact, taskId, 0, 'public/build/big.bin'), { redirect: 'manual' });
  assert.equal(res.status, 303);
  assert.equal(res.headers.get('x-taskcluster-artifact-storage-type'), 'object');
  const data = await fetch(res.headers.get('location'));
  assert.ok(Buffer.from(await data.arrayBuffer()).equals(big), 'getArtifact redirect serves other bytes');

  // Listings and info show the object artifacts.
  const info = await q.artifactInfo(taskId, 0, 'public/build/big.bin');
  assert.equal(info.storageType, 'object');
  assert.equal(info.contentType, 'application/octet-stream');
  assert.equal(info.contentLength, big.length);
  const list = await q.listArtifacts(taskId, 0);
  const names = list.artifacts.filter((a) => a.storageType === 'object').map((a) => a.name).sort();
  assert.deepEqual(names, ['private/secret.txt', 'public/build/big.bin']);

  // An object artifact whose upload never finished is not downloadable.
  const pending = await wq.createArtifact(taskId, 0, 'public/pending.bin', { storageType: 'object', expires, contentType: 'text/plain' });
  assert.ok(pending.uploadId);
  await expectError(() => anon.artifact(taskId, 0, 'public/pending.bin'), 404, 'ResourceNotFound');
  await q.reportCompleted(taskId, 0);
}
step('object artifacts: createArtifact, upload(), finishArtifact, downloadArtifact(), artifact(), getArtifact, listings');

console.log(`objects (${backend}): all passed`);
