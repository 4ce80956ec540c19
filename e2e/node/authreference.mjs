// Every method of the official client's Auth reference, called through
// taskcluster-client against hopper: each method hopper serves answers,
// and each it does not serve answers 404 (README's compatibility table
// says why). awsS3Credentials returns credentials from the deployment's
// STS (the Go test points hopper at a MinIO and allows the bucket `ref`),
// the Azure methods use Azure storage's emulator, Azurite.
import apis from 'taskcluster-client/src/apis.js';
import { taskcluster, assert, expectError, step, rootUrl, credentialsFromEnv } from './lib.mjs';

const auth = new taskcluster.Auth({ rootUrl, credentials: credentialsFromEnv(), retries: 0 });
const tester = new taskcluster.Auth({ rootUrl, credentials: { clientId: 'tester', accessToken: 'no-secret' }, retries: 0 });
const run = Date.now() % 100000;
const clientId = `ref/e2e-${run}`;
const roleId = `project:ref-${run}`;
const expires = taskcluster.fromNowJSON('1 hour');

// The calls, in an order where each finds what it needs.
const calls = {
  ping: async () => assert.equal((await auth.ping()).alive, true),
  lbheartbeat: () => auth.lbheartbeat(),
  heartbeat: () => auth.heartbeat(),
  version: async () => assert.equal(typeof (await auth.version()).version, 'string'),
  createRole: () => auth.createRole(roleId, { description: 'ref', scopes: ['queue:get-task:*'] }),
  role: async () => assert.deepEqual((await auth.role(roleId)).scopes, ['queue:get-task:*']),
  updateRole: () => auth.updateRole(roleId, { description: 'ref v2', scopes: ['queue:get-task:x'] }),
  listRoles: async () => assert.ok((await auth.listRoles()).some((r) => r.roleId === roleId)),
  listRoles2: async () => assert.ok(Array.isArray((await auth.listRoles2()).roles)),
  listRoleIds: async () => assert.ok((await auth.listRoleIds()).roleIds.includes(roleId)),
  createClient: () => auth.createClient(clientId, { description: 'ref', expires, scopes: [`assume:${roleId}`] }),
  client: async () => assert.equal((await auth.client(clientId)).clientId, clientId),
  updateClient: () => auth.updateClient(clientId, { description: 'ref v2', expires, scopes: [] }),
  resetAccessToken: async () => assert.equal((await auth.resetAccessToken(clientId)).accessToken.length, 44),
  disableClient: async () => assert.equal((await auth.disableClient(clientId)).disabled, true),
  enableClient: async () => assert.equal((await auth.enableClient(clientId)).disabled, false),
  listClients: async () => assert.ok((await auth.listClients({ prefix: 'ref/' })).clients.some((c) => c.clientId === clientId)),
  listAuditHistory: async () => assert.ok((await auth.listAuditHistory(credentialsFromEnv().clientId)).auditHistory.length > 0),
  getEntityHistory: async () => assert.ok((await auth.getEntityHistory('client', clientId)).auditHistory.length > 0),
  expandScopes: async () => assert.ok((await auth.expandScopes({ scopes: [`assume:${roleId}`] })).scopes.includes('queue:get-task:x')),
  currentScopes: async () => assert.deepEqual((await auth.currentScopes()).scopes, ['*']),
  awsS3Credentials: async () => {
    const c = await auth.awsS3Credentials('read-write', 'ref', 'e2e/');
    assert.ok(c.credentials.accessKeyId && c.credentials.secretAccessKey && c.credentials.sessionToken);
    assert.ok(new Date(c.expires) > new Date());
    const compat = await auth.awsS3Credentials('read-only', 'ref', 'e2e/', { format: 'iam-role-compat' });
    assert.equal(compat.Code, 'Success');
    assert.ok(compat.AccessKeyId && compat.Token && compat.Expiration);
    await expectError(() => auth.awsS3Credentials('read-write', 'not-allowed', 'e2e/'), 404, 'ResourceNotFound');
    const anonymous = new taskcluster.Auth({ rootUrl, retries: 0 });
    await expectError(() => anonymous.awsS3Credentials('read-write', 'ref', 'e2e/'), 403, 'InsufficientScopes');
  },
  authenticateHawk: async () => {
    const r = await auth.authenticateHawk({ method: 'get', resource: '/', host: 'example.com', port: 443 });
    assert.equal(r.status, 'no-auth');
  },
  testAuthenticate: async () => assert.equal((await tester.testAuthenticate({ clientScopes: ['test:a'], requiredScopes: ['test:a'] })).clientId, 'tester'),
  testAuthenticateGet: async () => assert.equal((await tester.testAuthenticateGet()).clientId, 'tester'),
  deleteClient: () => auth.deleteClient(clientId),
  deleteRole: () => auth.deleteRole(roleId),
};

// The Azure methods, against Azurite when the Go test started one
// (AZURE_ACCOUNT), else with no account configured.
const account = process.env.AZURE_ACCOUNT;
if (account) {
  Object.assign(calls, {
    azureAccounts: async () => assert.deepEqual((await auth.azureAccounts()).accounts, [account]),
    azureTableSAS: async () => {
      const r = await auth.azureTableSAS(account, 'refTable', 'read-write');
      assert.ok(r.sas.includes('sig=') && new Date(r.expiry) > new Date());
    },
    azureTables: async () => assert.ok((await auth.azureTables(account)).tables.includes('refTable')),
    azureContainerSAS: async () => assert.ok((await auth.azureContainerSAS(account, 'ref-container', 'read-write')).sas.includes('sr=c')),
    azureContainers: async () => assert.ok((await auth.azureContainers(account)).containers.includes('ref-container')),
  });
} else {
  Object.assign(calls, {
    azureAccounts: async () => assert.deepEqual((await auth.azureAccounts()).accounts, []),
    azureTables: () => expectError(() => auth.azureTables('acct'), 404, 'ResourceNotFound'),
    azureTableSAS: () => expectError(() => auth.azureTableSAS('acct', 'table', 'read-only'), 404, 'ResourceNotFound'),
    azureContainers: () => expectError(() => auth.azureContainers('acct'), 404, 'ResourceNotFound'),
    azureContainerSAS: () => expectError(() => auth.azureContainerSAS('acct', 'container', 'read-only'), 404, 'ResourceNotFound'),
  });
}

// What hopper does not serve, and the arguments to ask with.
const notServed = {
  sentryDSN: () => auth.sentryDSN('project'),
  gcpCredentials: () => auth.gcpCredentials('project', 'account@project.iam.gserviceaccount.com'),
};
// websocktunnelToken belongs to another piece of work: either answer is
// fine here, and its own script checks it when it is served.
const elsewhere = { websocktunnelToken: () => auth.websocktunnelToken('audience', 'client') };

const names = apis.Auth.reference.entries.filter((e) => e.type === 'function').map((e) => e.name);
for (const name of Object.keys(calls)) assert.ok(names.includes(name), `${name} is in the reference`);
for (const name of names) {
  assert.ok(calls[name] || notServed[name] || elsewhere[name], `the reference's ${name} has a call here`);
}
for (const [name, call] of Object.entries(calls)) {
  await call();
  step(name);
}
for (const [name, call] of Object.entries(notServed)) {
  await expectError(call, 404);
  step(`${name} not served (404)`);
}
for (const [name, call] of Object.entries(elsewhere)) {
  try {
    await call();
  } catch (err) {
    assert.equal(err.statusCode, 404, `${name}: ${err.message}`);
  }
}
console.log(`served ${Object.keys(calls).length} of ${names.length} methods of the Auth reference`);
step('the whole Auth reference');
