// The signed-in user's credentials, kept in sessionStorage only: they
// leave with the tab, and are never sent anywhere but in Hawk signatures.
import { temporaryCredentials, type Credentials } from './hawk';

const KEY = 'hopper.credentials';

type Listener = () => void;
const listeners = new Set<Listener>();

function read(): Credentials | null {
  try {
    const raw = sessionStorage.getItem(KEY);
    if (!raw) return null;
    const c = JSON.parse(raw) as Credentials & { expires?: number };
    if (c.expires && c.expires < Date.now()) {
      sessionStorage.removeItem(KEY);
      return null;
    }
    return c;
  } catch {
    return null;
  }
}

export const session = {
  credentials: read,
  /** expires is when temporary credentials stop working (ms), if they do. */
  expires(): number | undefined {
    const c = read() as (Credentials & { expires?: number }) | null;
    return c?.expires;
  },
  set(c: Credentials | null, expires?: number) {
    if (c) sessionStorage.setItem(KEY, JSON.stringify({ ...c, expires }));
    else sessionStorage.removeItem(KEY);
    listeners.forEach((l) => l());
  },
  subscribe(l: Listener): () => void {
    listeners.add(l);
    return () => listeners.delete(l);
  },
};

/**
 * signIn stores credentials for this tab. With temporary, the permanent
 * token is traded for temporary credentials (scopes: what the client has)
 * valid for hours, and only those are kept.
 */
export async function prepareCredentials(c: Credentials, temporary: boolean, scopes: string[], hours = 8): Promise<{ creds: Credentials; expires?: number }> {
  if (!temporary || c.certificate) {
    let expires: number | undefined;
    if (c.certificate) expires = (JSON.parse(c.certificate) as { expiry: number }).expiry;
    return { creds: c, expires };
  }
  const start = Date.now() - 5 * 60 * 1000;
  const expiry = Date.now() + hours * 3600 * 1000;
  return { creds: await temporaryCredentials(c, scopes, start, expiry), expires: expiry };
}
