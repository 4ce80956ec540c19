// #/profile: who is signed in (their login identity, provider and roles,
// or the client whose credentials were pasted in), until when, and the
// scopes their credentials expand to (auth.currentScopes).
import { call } from '../api';
import { Card, ErrorBox, Kv, Loading, useAsync } from '../components';
import { fmtTime } from '../format';
import { person, signOut } from '../login';
import { session } from '../session';
import { ProviderButtons, SignInForm, useSession } from '../signin';

export function ProfilePage() {
  const creds = useSession();
  const who = person();
  const key = creds ? `${creds.clientId} ${creds.accessToken}` : '';
  const scopes = useAsync(async () => (creds ? (await call<{ scopes: string[] }>('auth', 'GET', '/scopes/current')).scopes : []), [key]);
  if (!creds) {
    return (
      <div>
        <h1>Profile</h1>
        <p id="profile-signed-out">Not signed in.</p>
        <ProviderButtons returnTo="/ui/#/profile" />
        <SignInForm />
      </div>
    );
  }
  const expires = session.expires();
  return (
    <div>
      <h1>Profile</h1>
      <Card title="Signed in as" actions={<button class="secondary" onClick={() => void signOut()}>Sign out</button>}>
        <Kv pairs={[
          ['Identity', <span class="mono" id="profile-identity">{who?.identity ?? creds.clientId}</span>],
          ['Signed in through', who ? who.provider : 'credentials pasted in'],
          ['Roles', <span id="profile-roles">{who ? (who.roles.length ? who.roles.join(', ') : 'none') : '—'}</span>],
          ['Credentials', <span class="mono">{creds.clientId}</span>],
          ['Expire', expires ? fmtTime(new Date(expires).toISOString()) : 'never (permanent credentials)'],
        ]} />
      </Card>
      <Card title="Expanded scopes">
        {scopes.loading && <Loading what="scopes" />}
        {!!scopes.error && <ErrorBox error={scopes.error} />}
        {scopes.data && (
          <ul class="scopes mono" id="profile-scopes">
            {scopes.data.map((s) => <li key={s}>{s}</li>)}
          </ul>
        )}
      </Card>
    </div>
  );
}
