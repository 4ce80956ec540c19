// Sign-in with Taskcluster credentials: a client ID and access token (or
// temporary credentials with their certificate). They are checked with
// auth.currentScopes and kept in this tab's sessionStorage only; by
// default the permanent token is traded for temporary credentials at once.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, call } from './api';
import { ErrorBox, errorText } from './components';
import { needsSignIn } from './access';
import { prepareCredentials, session } from './session';
import type { Credentials } from './hawk';
import { loadProviders, onEnded, person, signInHref, signOut, type Provider } from './login';

export function useSession(): Credentials | null {
  const [c, setC] = useState(session.credentials());
  useEffect(() => session.subscribe(() => setC(session.credentials())), []);
  return c;
}

export function SignIn() {
  const creds = useSession();
  const [open, setOpen] = useState(false);
  const [notice, setNotice] = useState('');
  useEffect(() => onEnded(setNotice), []);
  if (creds) {
    const who = person();
    return (
      <div class="session">
        <a class="who" id="signed-in-as" href="#/profile" title="your profile">{who?.identity ?? creds.clientId}</a>
        <button class="secondary" id="sign-out" onClick={() => void signOut()}>Sign out</button>
      </div>
    );
  }
  return (
    <div class="session">
      {notice && <span class="notice small" role="status" id="sign-in-ended">{notice}</span>}
      <button onClick={() => { setOpen(!open); setNotice(''); }} id="sign-in">Sign in</button>
      {open && <div class="signin-menu"><ProviderButtons /><SignInForm onDone={() => setOpen(false)} /></div>}
    </div>
  );
}

/**
 * ProviderButtons offers a "Sign in with <provider>" button per provider
 * the deployment has (none without); the person comes back to returnTo.
 */
export function ProviderButtons({ returnTo }: { returnTo?: string }) {
  const [list, setList] = useState<Provider[]>([]);
  useEffect(() => {
    void loadProviders().then(setList);
  }, []);
  if (list.length === 0) return null;
  return (
    <div class="providers">
      {list.map((p) => (
        <a key={p.name} class="button provider" id={`sign-in-with-${p.name}`} href={signInHref(p, returnTo)}>Sign in with {p.displayName}</a>
      ))}
      <p class="small muted">or with a client's credentials:</p>
    </div>
  );
}

/**
 * SignInForm asks for credentials, checks them with auth.currentScopes and
 * keeps them in this tab's session; onDone runs once signed in.
 */
export function SignInForm({ onDone, label = 'Sign in' }: { onDone?: () => void; label?: string }) {
  const [clientId, setClientId] = useState('');
  const [accessToken, setAccessToken] = useState('');
  const [certificate, setCertificate] = useState('');
  const [temporary, setTemporary] = useState(true);
  const [error, setError] = useState<string>('');
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const given: Credentials = { clientId: clientId.trim(), accessToken: accessToken.trim() };
      if (certificate.trim()) given.certificate = certificate.trim();
      // Checks the credentials first: a wrong token fails here.
      await call<{ scopes: string[] }>('auth', 'GET', '/scopes/current', undefined, given);
      // Temporary credentials may carry only the client's own scopes (not
      // those every request gets from the anonymous role).
      let scopes: string[] = [];
      if (temporary && !given.certificate) {
        const client = await call<{ expandedScopes: string[] }>('auth', 'GET', `/clients/${encodeURIComponent(given.clientId)}`, undefined, given);
        scopes = client.expandedScopes;
      }
      const { creds: kept, expires } = await prepareCredentials(given, temporary, scopes);
      if (kept !== given) await call('auth', 'GET', '/scopes/current', undefined, kept);
      session.set(kept, expires);
      setAccessToken('');
      onDone?.();
    } catch (err) {
      setError(signInErrorText(err));
    }
    setBusy(false);
  };
  return (
    <form class="signin" onSubmit={submit} aria-label={label}>
      <label>Client ID<input name="clientId" value={clientId} autocomplete="username" required onInput={(e) => setClientId((e.target as HTMLInputElement).value)} /></label>
      <label>Access token<input name="accessToken" type="password" value={accessToken} autocomplete="current-password" required onInput={(e) => setAccessToken((e.target as HTMLInputElement).value)} /></label>
      <label>Certificate (temporary credentials only)<textarea name="certificate" rows={2} value={certificate} onInput={(e) => setCertificate((e.target as HTMLTextAreaElement).value)} /></label>
      <label class="check"><input type="checkbox" checked={temporary} onChange={(e) => setTemporary((e.target as HTMLInputElement).checked)} /> keep only temporary credentials (8 hours) in this tab</label>
      <p class="small muted">Credentials stay in this tab (sessionStorage) and sign requests with Hawk; they are never sent in the clear.</p>
      {error && <div class="error" role="alert">{error}</div>}
      <button type="submit" disabled={busy}>{busy ? 'Checking…' : label}</button>
    </form>
  );
}

/**
 * signInErrorText explains a refused sign-in with the hints hopper's CLI
 * gives for the same refusal (internal/cli hintFor): what to check.
 */
export function signInErrorText(err: unknown): string {
  const text = errorText(err);
  const hint = signInHint(err);
  return hint ? `${text} (${hint})` : text;
}

export function signInHint(err: unknown): string {
  if (!(err instanceof ApiError)) return '';
  if (err.status === 0) return `is hopper running at ${location.origin}?`;
  if (err.status !== 401) return '';
  const m = err.message;
  if (m.includes('Bad mac')) return 'check the access token: it does not match the client ID';
  if (m.includes('Stale timestamp')) return "check this machine's clock: Hawk allows a minute of skew";
  if (m.includes('certificate')) return 'check the certificate: temporary credentials expire';
  if (m.includes('client')) return 'check the client ID';
  return 'check the client ID and access token';
}

/**
 * AccessError shows a refused read: signed out, a request to sign in (the
 * anonymous role may not read what) with the form; otherwise the error as
 * the API gave it.
 */
export function AccessError({ error, what }: { error: unknown; what: string }) {
  const creds = useSession();
  if (!error) return null;
  if (needsSignIn(error, !!creds)) {
    return (
      <div class="notice signin-needed" role="alert">
        <p>Sign in to see {what}: anonymous visitors may not.</p>
        <ProviderButtons />
        <SignInForm label="Sign in" />
      </div>
    );
  }
  return <ErrorBox error={error} />;
}
