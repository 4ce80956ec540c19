// The page `taskcluster signin` opens: <rootUrl>/auth/clients/create?scope=…
// &name=…&expires=…&callback_url=…&description=… (hopper redirects it to
// #/auth/clients/create). The signed-in user confirms; the console creates
// a client named after them with the scopes asked for that they hold, and
// hands its credentials to the command's callback on localhost.
import { useState } from 'preact/hooks';
import { call, enc } from '../api';
import { Card, ErrorBox, Kv, Loading, useAsync } from '../components';
import { fmtTime } from '../format';
import { cliCallbackAllowed, cliClientId, fromNow, scopeIntersection } from '../scopes';
import { ProviderButtons, SignInForm, useSession } from '../signin';

export function CliSignInPage({ query }: { query: URLSearchParams }) {
  const creds = useSession();
  const requested = query.getAll('scope');
  const name = query.get('name') ?? 'cli';
  const callback = query.get('callback_url') ?? '';
  const description = query.get('description') ?? 'Temporary client for use on the command line';
  const expires = query.get('expires') ? fromNow(query.get('expires')!) : fromNow('1 day');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  // The scopes are those of the credentials they were read with: after a
  // sign-in, a render may come before the new ones are read.
  const who = creds ? `${creds.clientId} ${creds.accessToken}` : '';
  const current = useAsync(async () => ({ who, scopes: creds ? (await call<{ scopes: string[] }>('auth', 'GET', '/scopes/current')).scopes : [] }), [who]);

  const refusal = !callback ? 'This page is opened by `taskcluster signin`; its address names no callback_url.'
    : !cliCallbackAllowed(callback) ? `Callback URL ${callback} is not allowed: credentials go only to a command on this machine (http://localhost:<port>).`
      : !expires ? `The expiry "${query.get('expires')}" is not a relative time such as "1d" or "2 hours".`
        : '';
  if (refusal) {
    return (
      <div>
        <h1>Command-line sign-in</h1>
        <div class="error" role="alert" id="cli-signin-refused">{refusal}</div>
      </div>
    );
  }
  if (!creds) {
    return (
      <div>
        <h1>Command-line sign-in</h1>
        <p class="lead">A <code>taskcluster signin</code> command on this machine asks for credentials. Sign in to create them.</p>
        <Card><ProviderButtons /><SignInForm label="Sign in to continue" /></Card>
      </div>
    );
  }
  if (current.error) return <div><h1>Command-line sign-in</h1><ErrorBox error={current.error} /></div>;
  if (current.data?.who !== who) return <Loading what="your scopes" />;
  const clientId = cliClientId(creds.clientId, name);
  const scopes = scopeIntersection(requested.length ? requested : ['*'], current.data.scopes);
  const create = async () => {
    setBusy(true);
    setError(null);
    try {
      const made = await call<{ accessToken: string }>('auth', 'PUT', `/clients/${enc(clientId)}`, {
        description, expires: expires!.toISOString(), scopes, deleteOnExpiration: true,
      });
      // The command prints them as environment variables and stops.
      location.replace(`${callback}?clientId=${enc(clientId)}&accessToken=${enc(made.accessToken)}`);
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };
  return (
    <div>
      <h1>Command-line sign-in</h1>
      <p class="lead">A <code>taskcluster signin</code> command on this machine asks for credentials. Creating them makes this client and hands its access token to the command only.</p>
      <Card title="Client to create">
        <Kv pairs={[
          ['client ID', <span class="mono" id="cli-client-id">{clientId}</span>],
          ['description', description],
          ['expires', `${fmtTime(expires!.toISOString())} (deleted then)`],
          ['scopes', scopes.length ? <ul class="plain mono" id="cli-scopes">{scopes.map((s) => <li key={s}>{s}</li>)}</ul> : 'none of those asked for: you hold none of them'],
          ['asked for', requested.join(' ')],
          ['handed to', <span class="mono">{callback}</span>],
        ]} />
        <ErrorBox error={error} />
        <button id="cli-signin-create" disabled={busy} onClick={() => void create()}>{busy ? 'Creating…' : 'Create client and return to the command'}</button>
      </Card>
    </div>
  );
}
