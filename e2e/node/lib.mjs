// Shared helpers for the e2e scripts: a Queue client from the environment,
// task factories and small assertions that print what differed.
import taskcluster from 'taskcluster-client';
import assert from 'node:assert/strict';

export { taskcluster, assert };

export const rootUrl = process.env.TASKCLUSTER_ROOT_URL;

export function credentialsFromEnv() {
  return {
    clientId: process.env.TASKCLUSTER_CLIENT_ID,
    accessToken: process.env.TASKCLUSTER_ACCESS_TOKEN,
  };
}

export function queue(credentials = credentialsFromEnv(), extra = {}) {
  return new taskcluster.Queue({ rootUrl, credentials, retries: 0, ...extra });
}

export function taskDef(taskQueueId, overrides = {}) {
  return {
    taskQueueId,
    created: taskcluster.fromNowJSON(),
    deadline: taskcluster.fromNowJSON('1 hour'),
    payload: { command: [['true']] },
    metadata: { name: 'e2e', description: 'hopper e2e', owner: 'e2e@example.com', source: 'https://example.com/e2e' },
    ...overrides,
  };
}

// expectError runs fn and asserts it fails with the given status and code.
export async function expectError(fn, statusCode, code) {
  try {
    await fn();
  } catch (err) {
    assert.equal(err.statusCode, statusCode, `expected HTTP ${statusCode}, got ${err.statusCode}: ${err.message}`);
    if (code) assert.equal(err.code, code, `expected code ${code}, got ${err.code}: ${err.message}`);
    return err;
  }
  assert.fail(`expected an error ${statusCode} ${code || ''}`);
}

export function step(name) {
  console.log(`ok - ${name}`);
}
