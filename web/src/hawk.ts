// Hawk request signing and temporary credentials in the browser, with
// WebCrypto's HMAC-SHA256: the same wire format as Taskcluster's clients
// (and hopper's Go client), pinned by test/hawk.test.ts against the
// vectors hopper's Go tests take from the npm hawk and taskcluster-client
// packages (internal/auth/testdata).

/** Credentials as Taskcluster's clients take them. */
export interface Credentials {
  clientId: string;
  accessToken: string;
  /** JSON text of a temporary credentials' certificate, if any. */
  certificate?: string;
}

const encoder = new TextEncoder();

async function hmac(key: string, text: string): Promise<Uint8Array> {
  const k = await crypto.subtle.importKey('raw', encoder.encode(key), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await crypto.subtle.sign('HMAC', k, encoder.encode(text)));
}

function base64(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

function base64url(bytes: Uint8Array): string {
  return base64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function utf8Base64(text: string): string {
  return base64(encoder.encode(text));
}

/** The parts of a request a Hawk MAC covers. */
interface Artifacts {
  ts: string;
  nonce: string;
  method: string;
  resource: string;
  host: string;
  port: string;
  hash: string;
  ext: string;
}

/** normalized is the text a Hawk MAC signs ("hawk.1.header" or "hawk.1.bewit"). */
export function normalized(kind: 'header' | 'bewit', a: Artifacts): string {
  return `hawk.1.${kind}\n${a.ts}\n${a.nonce}\n${a.method.toUpperCase()}\n${a.resource}\n${a.host.toLowerCase()}\n${a.port}\n${a.hash}\n${a.ext}\n`;
}

function target(url: string): { resource: string; host: string; port: string } {
  const u = new URL(url);
  const port = u.port || (u.protocol === 'http:' ? '80' : '443');
  // The request-target as sent, which URL would normalise (a trailing
  // "?" is part of what the server signs).
  const rest = url.slice(url.indexOf('//') + 2);
  const slash = rest.indexOf('/');
  const resource = (slash < 0 ? '/' : rest.slice(slash)).split('#')[0];
  return { resource, host: u.hostname, port };
}

/**
 * ext is the base64 JSON "ext" attribute Taskcluster reads the certificate
 * of temporary credentials from; "" without one.
 */
export function ext(creds: Credentials): string {
  if (!creds.certificate) return '';
  return utf8Base64(JSON.stringify({ certificate: JSON.parse(creds.certificate) }));
}

/** A fresh 6-character nonce. */
export function nonce(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(6))).slice(0, 6);
}

/**
 * header returns the Authorization header for a request (no payload hash:
 * Taskcluster does not require one).
 */
export async function header(
  creds: Credentials, method: string, url: string,
  opts: { now?: number; nonce?: string; ext?: string } = {},
): Promise<string> {
  const t = target(url);
  const a: Artifacts = {
    ts: String(Math.floor((opts.now ?? Date.now()) / 1000)),
    nonce: opts.nonce ?? nonce(),
    method, ...t, hash: '', ext: opts.ext ?? ext(creds),
  };
  const mac = base64(await hmac(creds.accessToken, normalized('header', a)));
  let h = `Hawk id="${creds.clientId}", ts="${a.ts}", nonce="${a.nonce}"`;
  if (a.ext) h += `, ext="${a.ext}"`;
  return h + `, mac="${mac}"`;
}

/** bewit returns the "bewit" query value that lets GET url be fetched until now+ttl. */
export async function bewit(
  creds: Credentials, url: string, ttlSeconds: number,
  opts: { now?: number; ext?: string } = {},
): Promise<string> {
  const exp = String(Math.floor((opts.now ?? Date.now()) / 1000) + ttlSeconds);
  const e = opts.ext ?? ext(creds);
  const mac = base64(await hmac(creds.accessToken, normalized('bewit', {
    ts: exp, nonce: '', method: 'GET', ...target(url), hash: '', ext: e,
  })));
  return base64url(encoder.encode(`${creds.clientId}\\${exp}\\${mac}\\${e}`));
}

/** signedUrl appends a bewit to url, as Taskcluster's buildSignedUrl does. */
export async function signedUrl(creds: Credentials, url: string, ttlSeconds = 900): Promise<string> {
  const b = await bewit(creds, url, ttlSeconds);
  return url + (url.includes('?') ? '&' : '?') + 'bewit=' + b;
}

/** The text a temporary credentials' certificate signature covers. */
export function signatureText(c: { seed: string; start: number; expiry: number; scopes: string[]; clientId?: string; issuer?: string }): string {
  let s = 'version:1\n';
  if (c.issuer) s += `clientId:${c.clientId}\nissuer:${c.issuer}\n`;
  s += `seed:${c.seed}\nstart:${c.start}\nexpiry:${c.expiry}\nscopes:`;
  for (const scope of c.scopes) s += '\n' + scope;
  return s;
}

/**
 * temporaryCredentials makes unnamed temporary credentials from permanent
 * ones, valid from start to expiry (ms since the epoch) for scopes, as
 * taskcluster-client's createTemporaryCredentials does: the browser then
 * keeps only these, never the permanent access token.
 */
export async function temporaryCredentials(
  issuer: Credentials, scopes: string[], start: number, expiry: number, seed?: string,
): Promise<Credentials> {
  if (issuer.certificate) throw new Error('temporary credentials cannot issue temporary credentials');
  const s = seed ?? (base64url(crypto.getRandomValues(new Uint8Array(33))).slice(0, 44));
  const signature = base64(await hmac(issuer.accessToken, signatureText({ seed: s, start, expiry, scopes })));
  const certificate = JSON.stringify({ version: 1, scopes, start, expiry, seed: s, signature });
  return { clientId: issuer.clientId, accessToken: base64url(await hmac(issuer.accessToken, s)), certificate };
}
