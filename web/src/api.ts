// One client for every Taskcluster service hopper serves on this origin:
// requests signed with Hawk when the user signed in, Taskcluster's error
// bodies turned into ApiError so pages can show them as they came.
import { header, signedUrl, type Credentials } from './hawk';
import { session } from './session';
import { errorDigest } from './errordigest';

/** ApiError is a refused call, with Taskcluster's error code and message. */
export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
  /**
   * The message as a person needs it: its first line, then what to fix
   * (missing scopes, schema violations), without Taskcluster's details
   * block (errordigest.ts).
   */
  get summary(): string {
    const { summary, details } = errorDigest(this.message);
    return [summary, ...details].join('\n');
  }
}

export type Service = 'queue' | 'auth' | 'index' | 'secrets' | 'hooks' | 'flow' | 'notify' | 'github' | 'hopper' | 'worker-manager';

/** base is the origin the UI talks to (its own). */
export function base(): string {
  return location.origin;
}

export function serviceUrl(service: Service, path: string): string {
  return `${base()}/api/${service}/v1${path}`;
}

/** enc escapes one URL path parameter. */
export const enc = encodeURIComponent;

/**
 * call sends one API request and decodes the JSON reply. Signed with the
 * session's credentials when there are any (anonymous otherwise).
 */
export async function call<T>(service: Service, method: string, path: string, body?: unknown, creds: Credentials | null = session.credentials()): Promise<T> {
  const url = serviceUrl(service, path);
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (creds) headers.Authorization = await header(creds, method, url);
  let res: Response;
  try {
    res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, 'NetworkError', `Cannot reach hopper at ${base()}: ${(e as Error).message}`);
  }
  const text = await res.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON: reported below */
  }
  if (!res.ok) {
    const d = (data ?? {}) as { code?: string; message?: string; error?: string };
    throw new ApiError(res.status, d.code ?? res.statusText, d.message ?? d.error ?? text.slice(0, 500));
  }
  return data as T;
}

export const get = <T>(service: Service, path: string) => call<T>(service, 'GET', path);

/**
 * listAll follows continuation tokens, collecting the items under key,
 * up to max items.
 */
export async function listAll<T>(service: Service, path: string, key: string, max = 100000, onPage?: (items: T[]) => void): Promise<T[]> {
  const out: T[] = [];
  let token: string | undefined;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page = await get<Record<string, unknown>>(service, path + (token ? `${sep}continuationToken=${enc(token)}` : `${sep}limit=1000`));
    const items = (page[key] ?? []) as T[];
    out.push(...items);
    onPage?.(out);
    token = page.continuationToken as string | undefined;
  } while (token && out.length < max);
  return out;
}

/**
 * artifactUrl is where a browser opens an artifact: public ones directly,
 * others signed with a bewit when the user signed in.
 */
export async function artifactUrl(taskId: string, runId: number, name: string): Promise<string> {
  const url = serviceUrl('queue', `/task/${enc(taskId)}/runs/${runId}/artifacts/${name.split('/').map(enc).join('/')}`);
  const creds = session.credentials();
  if (name.startsWith('public/') || !creds) return url;
  return signedUrl(creds, url);
}
