// #/third-party?client_id=…: a registered website asks, through
// /login/oauth/authorize, for credentials acting for the person signed in
// through a provider. The person reads what it asks for and allows or
// denies; the server (POST /login/oauth/decision) checks the request again
// and says where the browser goes: back to the website, with a code or
// with access_denied.
import { useState } from 'preact/hooks';
import { Card, ErrorBox, Kv } from '../components';
import { person } from '../login';
import { ProviderButtons, useSession } from '../signin';

export function ThirdPartyPage({ query }: { query: URLSearchParams }) {
  useSession();
  const who = person();
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const clientId = query.get('client_id') ?? '';
  const redirectUri = query.get('redirect_uri') ?? '';
  const scopes = (query.get('scope') ?? '').split(' ').filter(Boolean);
  let site = redirectUri;
  try {
    site = new URL(redirectUri).origin;
  } catch {
    /* shown as given */
  }
  if (!who) {
    return (
      <div>
        <h1>Sign in to continue</h1>
        <p id="third-party-sign-in">{clientId} ({site}) asks for credentials to act for you. Sign in first:</p>
        <ProviderButtons returnTo={location.pathname + location.hash} />
      </div>
    );
  }
  const decide = async (allow: boolean) => {
    setBusy(true);
    setError(null);
    try {
      const r = await fetch('/login/oauth/decision', {
        method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({
          clientId, redirectUri, scope: scopes, allow, state: query.get('state') ?? '', expires: query.get('expires') ?? '',
          codeChallenge: query.get('code_challenge') ?? '', codeChallengeMethod: query.get('code_challenge_method') ?? '',
        }),
      });
      const body = (await r.json()) as { redirectTo?: string; message?: string };
      if (!r.ok || !body.redirectTo) throw new Error(body.message ?? `refused (${r.status})`);
      location.assign(body.redirectTo);
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };
  return (
    <div>
      <h1>Allow {clientId}?</h1>
      <Card title="A website asks for credentials">
        <Kv pairs={[
          ['Website', <span class="mono" id="third-party-client">{clientId}</span>],
          ['About it', query.get('description') ?? '—'],
          ['Sends you back to', <span class="mono">{site}</span>],
          ['Acting for', <span class="mono">{who.identity}</span>],
          ['For at most', query.get('expires') ?? '—'],
        ]} />
        <p>It will get credentials with these scopes, as far as you hold them:</p>
        <ul class="scopes mono" id="third-party-scopes">{scopes.map((s) => <li key={s}>{s}</li>)}</ul>
        {!!error && <ErrorBox error={error} />}
        <button id="third-party-allow" disabled={busy} onClick={() => void decide(true)}>Allow</button>{' '}
        <button id="third-party-deny" class="secondary" disabled={busy} onClick={() => void decide(false)}>Deny</button>
      </Card>
    </div>
  );
}
