// A real OpenID provider for the sign-in tests: panva's oidc-provider
// (certified by the OpenID Foundation) with its development sign-in pages
// (any user name and password sign in), the device flow (RFC 8628) and a
// groups claim. The Go tests start it; nothing here is for production.
//
// Environment: OIDC_PORT, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET,
// OIDC_REDIRECT_URIS (comma-separated), OIDC_GROUPS (JSON: user name to
// its groups), OIDC_DEVICE_TTL (seconds a device code lasts, default 600).
import Provider from 'oidc-provider';

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
const port = Number(env('OIDC_PORT'));
const issuer = `http://127.0.0.1:${port}`;
const groups = JSON.parse(env('OIDC_GROUPS', '{}'));

const provider = new Provider(issuer, {
  clients: [{
    client_id: env('OIDC_CLIENT_ID'),
    client_secret: env('OIDC_CLIENT_SECRET'),
    redirect_uris: env('OIDC_REDIRECT_URIS').split(','),
    grant_types: ['authorization_code', 'urn:ietf:params:oauth:grant-type:device_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  scopes: ['openid', 'profile', 'email', 'groups'],
  claims: {
    openid: ['sub'], profile: ['preferred_username', 'name'], email: ['email', 'email_verified'], groups: ['groups'],
  },
  // The claims of the scopes granted go in the ID token, where hopper
  // reads the groups (as Gitea puts them there).
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true }, deviceFlow: { enabled: true } },
  ttl: { DeviceCode: Number(env('OIDC_DEVICE_TTL', '600')) },
  cookies: { keys: ['hopper-e2e-cookie-key'] },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return {
          sub: id, preferred_username: id, name: id, email: `${id}@example.com`, email_verified: true, groups: groups[id] ?? [],
        };
      },
    };
  },
});
provider.listen(port, '127.0.0.1', () => console.log(`ready ${issuer}`));
