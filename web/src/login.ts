// Single sign-on: the deployment's identity providers (GET /login/providers),
// and the temporary credentials of a person signed in through one (POST
// /login/credentials, in the body, never a URL). The session itself is an
// HttpOnly cookie scripts never see; the credentials are kept, like pasted
// ones, in this tab's sessionStorage, renewed before they expire and
// dropped when the sign-in has ended.
import type { Credentials } from './hawk';
import { session } from './session';

export interface Provider {
  name: string;
  kind: string;
  displayName: string;
  signInUrl: string;
}

/** Person is who signed in through a provider, as the server says. */
export interface Person {
  identity: string;
  provider: string;
  roles: string[];
  /** scopes are the credentials' own (assume: the identity and roles). */
  scopes: string[];
  expires: string;
}

interface CredentialsReply extends Person {
  credentials: Credentials;
}

const PERSON = 'hopper.person';

let providers: Promise<Provider[]> | null = null;

/** loadProviders lists the providers once per page ([] without any). */
export function loadProviders(): Promise<Provider[]> {
  providers ??= fetch('/login/providers', { headers: { Accept: 'application/json' } })
    .then(async (r) => (r.ok ? ((await r.json()) as { providers: Provider[] }).providers : []))
    .catch(() => []);
  return providers;
}

/**
 * signInHref is where a provider's button goes: the sign-in, then back to
 * returnTo (this page by default), a path of the console's own.
 */
export function signInHref(p: Provider, returnTo = location.pathname + location.search + location.hash): string {
  return `${p.signInUrl}?returnTo=${encodeURIComponent(returnTo)}`;
}

/** person is who signed in through a provider in this tab, if anyone. */
export function person(): Person | null {
  if (!session.credentials()) return null;
  try {
    const raw = sessionStorage.getItem(PERSON);
    return raw ? (JSON.parse(raw) as Person) : null;
  } catch {
    return null;
  }
}

export class SignInEnded extends Error {}

/**
 * fetchCredentials takes the signed-in person's temporary credentials and
 * keeps them in this tab: null when no one is signed in (the session
 * expired, or never was).
 */
export async function fetchCredentials(): Promise<Person | null> {
  const r = await fetch('/login/credentials', { method: 'POST', credentials: 'same-origin', headers: { Accept: 'application/json' } });
  if (r.status === 401 || r.status === 404) return null;
  if (!r.ok) throw new Error(`the sign-in service answered ${r.status}`);
  const reply = (await r.json()) as CredentialsReply;
  const { credentials, ...who } = reply;
  sessionStorage.setItem(PERSON, JSON.stringify(who));
  session.set(credentials, Date.parse(reply.expires));
  return who;
}

/** signOut ends the provider sign-in (if any) and forgets the credentials. */
export async function signOut(): Promise<void> {
  if (person()) {
    await fetch('/login/logout', { method: 'POST', credentials: 'same-origin' }).catch(() => undefined);
  }
  sessionStorage.removeItem(PERSON);
  session.set(null);
}

/** renewIn is how long before expires (ms) the console asks again. */
export function renewIn(expires: number, now = Date.now()): number {
  return Math.max(0, expires - now - 5 * 60 * 1000);
}

/**
 * nextRenewal is when (ms from now) to ask for credentials again: five
 * minutes before they expire; but once asking gave no later expiry (the
 * credentials end with the session), only when they have expired, to
 * learn that the sign-in ended rather than asking again and again.
 */
export function nextRenewal(expires: number, renewedFrom: number, now = Date.now()): number {
  if (expires > renewedFrom) return renewIn(expires, now);
  return Math.max(0, expires - now) + 1000;
}

let timer: ReturnType<typeof setTimeout> | undefined;
// renewedFrom is the expiry of the credentials last renewed.
let renewedFrom = 0;
let ended: ((why: string) => void) | undefined;

/** onEnded is told when a provider sign-in ends by itself (expiry). */
export function onEnded(f: (why: string) => void) {
  ended = f;
}

function schedule() {
  clearTimeout(timer);
  const who = person();
  const expires = session.expires();
  if (!who || !expires) return;
  timer = setTimeout(async () => {
    renewedFrom = expires;
    try {
      if (!(await fetchCredentials())) {
        sessionStorage.removeItem(PERSON);
        session.set(null);
        ended?.('Your sign-in has expired: sign in again.');
      }
    } catch {
      schedule(); // the server is unreachable: keep what we have until it expires
    }
  }, nextRenewal(expires, renewedFrom));
}

/**
 * startSignOn picks up a provider sign-in: this tab's credentials are
 * renewed before they expire, and a tab opened while signed in (or coming
 * back from the provider) takes credentials at once.
 */
export async function startSignOn(): Promise<void> {
  session.subscribe(schedule);
  if (session.credentials()) {
    schedule();
    return;
  }
  if ((await loadProviders()).length === 0) return;
  await fetchCredentials().catch(() => null);
}
