// The Github service through the official client: a real push payload of
// @octokit/webhooks-examples signed with @octokit/webhooks-methods reaches
// the webhook, its task is created and reported; then every method of
// taskcluster-client's Github: builds (with its filter rules),
// renderTaskclusterYml, repository, createStatus, createComment, badge,
// latest and cancelBuilds. The Go test (internal/e2e/github_test.go) runs
// the local GitHub that checks every request hopper makes.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { sign } from '@octokit/webhooks-methods';
import { taskcluster, assert, expectError, step, rootUrl, credentialsFromEnv } from './lib.mjs';

const require = createRequire(import.meta.url);
const examples = JSON.parse(readFileSync(require.resolve('@octokit/webhooks-examples/api.github.com/index.json'), 'utf8'));
const push = examples.find((e) => e.name === 'push').examples[4];
const root = credentialsFromEnv();
const github = new taskcluster.Github({ rootUrl, credentials: root, retries: 0 });
const auth = new taskcluster.Auth({ rootUrl, credentials: root, retries: 0 });
const tq = process.env.GITHUB_E2E_QUEUE;
const owner = 'Codertocat';
const repo = 'Hello-World';

assert.equal((await github.ping()).alive, true);
step('ping');

await auth.createRole(`repo:github.com/${owner}/${repo}:branch:master`, {
  description: 'e2e', scopes: [`queue:create-task:lowest:${tq}`, 'queue:create-task:project:none'],
});
await auth.createRole(`repo:github.com/${owner}/${repo}:*`, {
  description: 'e2e', scopes: ['queue:seal-task-group:taskcluster-github/*', 'queue:cancel-task-group:taskcluster-github/*'],
});

const body = JSON.stringify(push);
const deliver = async (signature) => fetch(`${rootUrl}/api/github/v1/github`, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json', 'X-GitHub-Event': 'push', 'X-GitHub-Delivery': crypto.randomUUID(),
    ...(signature ? { 'X-Hub-Signature-256': signature } : {}) },
  body,
});
assert.equal((await deliver(await sign(process.env.GITHUB_WEBHOOK_SECRET, body))).status, 204);
assert.equal((await deliver(await sign('not the secret', body))).status, 403);
assert.equal((await deliver(undefined)).status, 400);
step('githubWebHookConsumer');

let builds;
for (let i = 0; i < 100; i++) {
  ({ builds } = await github.builds({ organization: owner, repository: repo }));
  if (builds.length > 0) break;
  await new Promise((r) => setTimeout(r, 100));
}
assert.equal(builds.length, 1);
const build = builds[0];
assert.equal(build.sha, push.after);
assert.equal(build.state, 'pending');
assert.equal(build.eventType, 'push');
await expectError(() => github.builds({ repository: repo }), 400, 'InputError');
await expectError(() => github.builds({ organization: owner, sha: push.after }), 400, 'InputError');
const page = await github.builds({ limit: 1 });
assert.equal(page.builds.length, 1);
step('builds');

const rendered = await github.renderTaskclusterYml({
  body: readFileSync(process.env.GITHUB_E2E_TCYML, 'utf8'),
  fakeEvent: { type: 'github-pull-request', action: 'opened' },
  organization: 'org', repository: 'repo',
});
assert.equal(rendered.tasks.length, 1);
assert.equal(rendered.tasks[0].task.schedulerId, 'taskcluster-github');
assert.equal(rendered.tasks[0].task.taskGroupId, rendered.tasks[0].taskId);
assert.deepEqual(rendered.scopes, ['assume:repo:github.com/org/repo:pull-request', 'queue:route:statuses', 'queue:scheduler-id:taskcluster-github']);
await expectError(() => github.renderTaskclusterYml({ body: 'version: 1\ntasks: [{$eval: nope}]', fakeEvent: { type: 'github-push' } }), 400, 'InputError');
step('renderTaskclusterYml');

assert.deepEqual(await github.repository(owner, repo), { installed: true });
assert.deepEqual(await github.repository(owner, 'not-installed'), { installed: false });
step('repository');

await github.createStatus(owner, repo, push.after, { state: 'success', context: 'e2e', target_url: 'https://example.com/e2e' });
await github.createComment(owner, repo, 1, { body: 'hello from the e2e test' });
await expectError(() => github.createStatus(owner, 'not-installed', push.after, { state: 'success' }), 404, 'ResourceNotFound');
await expectError(() => github.createStatus(owner, repo, push.after, { state: 'bogus' }), 400, 'InputValidationError');
step('createStatus, createComment');

// badge and latest answer an image and a redirect: fetched through
// signed URLs.
const badge = await fetch(github.buildSignedUrl(github.badge, owner, repo, 'master'));
assert.equal(badge.status, 200);
assert.equal(badge.headers.get('content-type'), 'image/svg+xml');
assert.match(await badge.text(), /<svg/);
let latest;
for (let i = 0; i < 100; i++) {
  // The build's pending status is sent by a background duty.
  latest = await fetch(github.buildSignedUrl(github.latest, owner, repo, 'master'), { redirect: 'manual' });
  if (latest.status === 303) break;
  await new Promise((r) => setTimeout(r, 100));
}
assert.equal(latest.status, 303);
assert.match(latest.headers.get('location'), /\/ui\/#\/group\//);
step('badge, latest');

const cancelled = await github.cancelBuilds(owner, repo);
assert.equal(cancelled.builds.length, 1);
assert.equal(cancelled.builds[0].state, 'cancelled');
await expectError(() => github.cancelBuilds(owner, repo), 404, 'ResourceNotFound');
({ builds } = await github.builds({ organization: owner, repository: repo }));
assert.equal(builds[0].state, 'cancelled');
step('cancelBuilds');
